"""Shared fixtures of the simulator API tests: one in-process server per test module (aiohttp on a thread).

The server runs exactly the code of ``python -m pytest_topsail.sim`` (``cli.serve``) with HTTPS, a bearer token and a
kubeconfig, on its own event loop in a daemon thread; tests talk to it only over HTTP, as a user's client would.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_topsail.sim.controllers.profile import Profile
from pytest_topsail.sim.run.cli import Options, serve

START_TIMEOUT = 30.0
KUBECTL_TIMEOUT = 60.0

# Controllers for tests of pure API semantics: none, so that nothing but the test changes the objects.
NO_CONTROLLERS: list[str] = []


class InProcessSim:
    """A simulator served from a thread of the test process."""

    def __init__(self, directory: Path, profile: dict[str, Any] | None = None,
                 controllers: list[str] | None = None, audit_log: bool = True,
                 watch_log_size: int = 20_000) -> None:
        self.kubeconfig_path = directory / "kubeconfig"
        self.audit_log_path = directory / "audit.jsonl" if audit_log else None
        # preinstalled all unless the test says otherwise: GPUs advertised, Kubeflow, KServe and Kueue kinds served
        profile = {"preinstalled": ["all"], **(profile or {"node_pools": []})}
        self._options = Options(profile=Profile.from_dict(profile), port=0,
                                kubeconfig=self.kubeconfig_path, audit_log=self.audit_log_path,
                                controllers=controllers, watch_log_size=watch_log_size)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="topsail-sim-test", daemon=True)
        self._error: BaseException | None = None
        self.url = ""

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await serve(self._options, self._stop)

        try:
            asyncio.run(main())
        except BaseException as error:  # reported by start()
            self._error = error

    def start(self) -> InProcessSim:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self.kubeconfig_path.exists():
            if self._error is not None:
                raise self._error
            if time.monotonic() > deadline:
                raise TimeoutError(f"in-process simulator did not write {self.kubeconfig_path} in {START_TIMEOUT} s")
            time.sleep(0.01)
        self.url = yaml.safe_load(self.kubeconfig_path.read_text())["clusters"][0]["cluster"]["server"]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)

    def raw(self, method: str, path: str, body: bytes | str | None = None,
            content_type: str = "application/json", authorized: bool = True,
            headers: dict[str, str] | None = None) -> Any:
        """One HTTP request as a hand-written client would send it (CA-verified); returns the requests.Response."""
        import base64

        import requests

        ca_file = self.kubeconfig_path.with_name("ca.crt")
        if not ca_file.exists():
            cluster = yaml.safe_load(self.kubeconfig_path.read_text())["clusters"][0]["cluster"]
            ca_file.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        headers = {"Content-Type": content_type, **(headers or {})}
        if authorized:
            headers["Authorization"] = f"Bearer {self.token()}"
        return requests.request(method, self.url + path, data=body, headers=headers, verify=str(ca_file), timeout=30)

    def token(self) -> str:
        return yaml.safe_load(self.kubeconfig_path.read_text())["users"][0]["user"]["token"]

    def api_client(self) -> Any:
        from kubernetes import config

        return config.new_client_from_config(str(self.kubeconfig_path))

    def dynamic_client(self) -> Any:
        from kubernetes import dynamic

        return dynamic.DynamicClient(self.api_client())

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True,
                binary: str = "kubectl") -> subprocess.CompletedProcess[str]:
        result = subprocess.run([binary, "--kubeconfig", str(self.kubeconfig_path), *args], input=stdin,
                                capture_output=True, text=True, timeout=KUBECTL_TIMEOUT)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def audit_records(self) -> list[dict[str, Any]]:
        import json

        assert self.audit_log_path is not None
        return [json.loads(line) for line in self.audit_log_path.read_text().splitlines() if line.strip()]


def start_in_process(tmp_path_factory: pytest.TempPathFactory, name: str, **kwargs: Any) -> Iterator[InProcessSim]:
    sim = InProcessSim(tmp_path_factory.mktemp(name), **kwargs).start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="session")
def start_sim() -> Any:
    """``yield from start_sim(tmp_path_factory, name, **InProcessSim options)`` in a module's own fixture."""
    return start_in_process


@pytest.fixture(scope="session")
def no_controllers() -> list[str]:
    return NO_CONTROLLERS


@pytest.fixture(scope="module")
def api_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessSim]:
    """No controllers, no nodes: only the API semantics."""
    yield from start_in_process(tmp_path_factory, "api-sim", controllers=NO_CONTROLLERS)


@pytest.fixture(scope="module")
def cluster_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessSim]:
    """Every controller, two a100 nodes, fast stages: pods get scheduled, run, log and complete."""
    profile = {"seed": 7, "node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100"}]}
    yield from start_in_process(tmp_path_factory, "cluster-sim", profile=profile)


@pytest.fixture
def wait_until() -> Any:
    """The polling helper ``_wait_until(predicate, timeout, what)``."""
    return _wait_until


def _wait_until(predicate: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
