"""Fixtures of the LLM load suite: the served models (the reference server, one per model and server config, on
its own event loop: gRPC and the OpenAI-compatible HTTP front over one ModelServer), and the suite's options.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError

START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Endpoint:
    """Where one served model answers, and what the KPI labels say about how it is served."""

    http_url: str
    grpc_target: str
    load_duration_s: float
    accelerator: str
    replicas: int = 1


class ReferenceServers:
    """Reference servers started on first use, one per (model, server settings), all stopped at session end."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[Any, Endpoint]] = {}

    def endpoint(self, model: str, server: dict[str, Any], gpu_profile: str, itl_factor: float,
                 where: str) -> Endpoint:
        key = json.dumps([model, server, gpu_profile, itl_factor], sort_keys=True)
        if key not in self.started:
            self.started[key] = self.start(model, server, gpu_profile, itl_factor, where)
        return self.started[key][1]

    def start(self, model: str, server: dict[str, Any], gpu_profile: str, itl_factor: float,
              where: str) -> tuple[Any, Endpoint]:
        from pytest_topsail.tgis.model_config import load_model_config
        from pytest_topsail.tgis.server import ServerSettings, ServerThread

        config = load_model_config(server, f"{where}: server")
        began = time.perf_counter()
        thread = ServerThread(ServerSettings(model_name=model, config=config, gpu_profile=gpu_profile, http_port=0),
                              start_timeout=START_TIMEOUT_S)
        running = thread.start()
        if itl_factor != 1.0:  # a slower decode on the same GPU profile: prefill (TTFT) unchanged
            latency = running.backend.latency
            running.backend.latency = dataclasses.replace(
                latency, itl_base_ms=latency.itl_base_ms * itl_factor,
                itl_ms_per_running=latency.itl_ms_per_running * itl_factor)
        endpoint = Endpoint(http_url=f"http://127.0.0.1:{running.http_port}", grpc_target=running.address,
                            load_duration_s=time.perf_counter() - began, accelerator=gpu_profile)
        return thread, endpoint

    def stop(self) -> None:
        for thread, _ in self.started.values():
            thread.stop()
        self.started.clear()


@pytest.fixture(scope="session")
def llm_servers() -> Iterator[ReferenceServers]:
    servers = ReferenceServers()
    yield servers
    servers.stop()


@pytest.fixture
def llm_endpoint(llm_servers: ReferenceServers, case: Any, topsail_config: Config) -> Endpoint:
    """The served model of this item's case (started once per model and server settings)."""
    options = topsail_config.get("tests.llm_load", {}) or {}
    try:
        return llm_servers.endpoint(case.settings["model"], case.settings.get("server") or {},
                                    str(options.get("gpu_profile", "a100")), float(options.get("itl_factor", 1.0)),
                                    case.source or case.id)
    except TopsailError as error:
        pytest.fail(str(error), pytrace=False)
