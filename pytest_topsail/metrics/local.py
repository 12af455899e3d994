"""A real Prometheus server (the Debian package's binary) scraping the simulated cluster, on 127.0.0.1.

``start_local(...)`` writes the scrape configuration (the simulator's dcgm-exporter, cAdvisor and apiserver
endpoints, every ``interval`` seconds, with the simulator's token and CA from files in a private directory), starts
the server under a small watchdog (``python -m pytest_topsail.metrics.local``) and returns once it answers. The
watchdog stops the server when the simulator's process ends (the run's end, whichever xdist worker owned it) or when
it is told to (SIGTERM); Prometheus never outlives the run. Its configuration and log go to the artifacts (they
hold file names, never the token).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import yaml

from pytest_topsail.cluster.rundir import process_exists
from pytest_topsail.errors import TopsailError
from pytest_topsail.waiting import WaitTimeout, poll

INSTALL_HINT = ("metrics: the prometheus binary ({binary}) is not installed, so there are no metric KPIs "
                "(Debian/Ubuntu: apt-get install prometheus; or set metrics.prometheus.url)")
# (job, path, the least scrape interval in s): the GPU and container series at the points' resolution; the
# apiserver's own metrics (thousands of histogram series, 20-100 ms to render in the simulator's process, which also
# serves the models: every scrape was a stall of their tokens) at most every 5 s (OpenShift's monitoring: 30 s)
JOBS = (("dcgm-exporter", "/metrics/dcgm", 0.0), ("kubelet-cadvisor", "/metrics/cadvisor", 0.0),
        ("apiserver", "/metrics", 5.0))
POINT_JOBS = frozenset(job for job, _, least_s in JOBS if not least_s)  # scraped at the points' resolution
WATCH_POLL_S = 0.2


@dataclass(frozen=True)
class LocalPrometheus:
    url: str
    pid: int  # the watchdog's; SIGTERM stops the server
    config_path: Path
    log_path: Path


def find_binary(name: str) -> str | None:
    return shutil.which(name)


def scrape_config(target_url: str, token_file: Path, ca_file: Path, interval_s: float) -> dict[str, Any]:
    parts = urlsplit(target_url)
    interval = f"{int(interval_s * 1000)}ms"
    jobs = []
    for job, path, least_s in JOBS:
        every = f"{int(max(interval_s, least_s) * 1000)}ms"
        jobs.append({
            "job_name": job, "metrics_path": path, "scheme": parts.scheme or "https",
            "scrape_interval": every, "scrape_timeout": interval,
            "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
            "tls_config": {"ca_file": str(ca_file)},
            "static_configs": [{"targets": [parts.netloc], "labels": {"cluster": "topsail-sim"}}],
        })
    return {"global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
            "scrape_configs": jobs}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_private(path: Path, text: str) -> Path:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def start_local(*, binary: str, private_dir: Path, artifacts_dir: Path, target_url: str, token: str, ca_pem: str,
                interval_s: float, watch_pid: int | None, timeout_s: float = 15.0) -> LocalPrometheus:
    """Start the server; a TopsailError naming the binary, the log and the cause if it does not come up."""
    token_file = write_private(private_dir / "token", token)
    ca_file = write_private(private_dir / "ca.crt", ca_pem)
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    config_path = artifacts_dir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(scrape_config(target_url, token_file, ca_file, interval_s),
                                          sort_keys=False), encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = artifacts_dir / "prometheus.log"
    storage = Path(tempfile.mkdtemp(prefix="topsail-prometheus-"))  # removed by the watchdog once the server ends
    command = [binary, f"--config.file={config_path}", f"--storage.tsdb.path={storage}",
               f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d",
               "--web.enable-lifecycle", "--log.level=warn"]
    (artifacts_dir / "command.txt").write_text(" ".join(command) + "\n", encoding="utf-8")
    watch = ["--watch-pid", str(watch_pid)] if watch_pid else []
    watch += ["--remove", str(storage)]
    with open(log_path, "ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "pytest_topsail.metrics.local", *watch, "--", *command],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)

    def ready() -> bool:
        if process.poll() is not None:
            raise TopsailError(f"metrics: Prometheus ({binary}) exited with code {process.returncode} at start; "
                               f"its log: {log_path}: {_tail(log_path)}")
        return requests.get(url + "/-/ready", timeout=1).status_code == 200

    try:
        poll(ready, bool, what=f"Prometheus ({binary}) to answer on {url}", timeout=timeout_s, interval=0.05,
             transient=(requests.exceptions.RequestException,), describe=lambda _: f"its log: {log_path}")
    except WaitTimeout as error:
        stop(process.pid)
        raise TopsailError(f"metrics: {error}") from None
    return LocalPrometheus(url, process.pid, config_path, log_path)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def stop(pid: int) -> None:
    """Tell the watchdog to stop the server (it waits for it, then exits)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def watchdog(command: Sequence[str], watch_pid: int | None, remove: Path | None = None, grace_s: float = 5.0) -> int:
    """Run ``command`` until it ends, SIGTERM/SIGINT arrives, or ``watch_pid`` is gone; then stop it and remove
    ``remove`` (its storage)."""
    stopping = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    child = subprocess.Popen(list(command), stdin=subprocess.DEVNULL)
    while child.poll() is None:
        if stopping or (watch_pid is not None and not process_exists(watch_pid)):
            child.terminate()
            try:
                child.wait(grace_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            break
        time.sleep(WATCH_POLL_S)
    if remove is not None:
        shutil.rmtree(remove, ignore_errors=True)
    return 0 if stopping or child.returncode in (0, -signal.SIGTERM) else int(child.returncode or 0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_topsail.metrics.local",
                                     description="run Prometheus until the watched process ends")
    parser.add_argument("--watch-pid", type=int, default=None)
    parser.add_argument("--remove", type=Path, default=None, help="a directory to remove once the command ended")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    return watchdog(command, args.watch_pid, args.remove)


if __name__ == "__main__":
    sys.exit(main())
