"""``python -m pytest_topsail.sim``: run the simulated cluster in the foreground until SIGINT/SIGTERM.

Binds 127.0.0.1 only, serves HTTPS with a CA made for this run, writes a kubeconfig (mode 0600) once it is ready,
prints the URL, and removes the kubeconfig when it stops. Bad input ends with one clear message and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import secrets
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from pytest_topsail.errors import TopsailError
from pytest_topsail.sim.api.server import ApiServer
from pytest_topsail.sim.registry.store import Store
from pytest_topsail.sim.run.kubeconfig import check_writable, write_kubeconfig
from pytest_topsail.sim.run.tls import make_certificates

DEFAULT_KUBECONFIG = "topsail-sim.kubeconfig"
PROG = "python -m pytest_topsail.sim"
SHUTDOWN_S = 0.25  # aiohttp shutdown_timeout (see serve)
# The cyclic GC's first threshold (700 by default). Every request and commit allocates hundreds of short-lived
# dicts while the store keeps millions of objects: at 700 the collections that walk the store (gen 2, run when a
# quarter more objects have survived) took a third of the CPU of 10,000 pods created -> Running.
GC_THRESHOLD = 20_000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Simulated GPU cluster serving the Kubernetes API.")
    parser.add_argument("--profile", type=Path, help="simulator profile YAML (node pools, stages, faults, seed)")
    parser.add_argument("--nodes", type=int, help="number of nodes (shortcut over the profile)")
    parser.add_argument("--gpu-profile", help="GPU profile of the nodes, e.g. a100, h100, l40s, t4")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per node")
    parser.add_argument("--seed", type=int, help="random seed (delays, jitter, faults, uids)")
    parser.add_argument("--preinstalled", metavar="NAMES",
                        help="what the cluster has from the start: 'all' or a comma list of gpu_operator, "
                             "trainingoperator, kserve, kueue (default: none, a fresh cluster)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: any free port)")
    parser.add_argument("--kubeconfig", type=Path, default=Path(DEFAULT_KUBECONFIG),
                        help=f"where to write the kubeconfig (default ./{DEFAULT_KUBECONFIG})")
    parser.add_argument("--audit-log", type=Path, help="append one JSON line per mutating request to this file")
    parser.add_argument("--api-only", action="store_true",
                        help="serve the API without controllers: nothing schedules or runs pods (API benchmarks)")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--built-profile", type=Path, help=argparse.SUPPRESS)  # the launcher's profile.json
    parser.add_argument("--parent-pipe", type=int, help=argparse.SUPPRESS)  # exit when this fd reaches EOF
    parser.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # write "ready" here once serving
    parser.add_argument("--parent-death-signal", action="store_true", help=argparse.SUPPRESS)  # prctl PDEATHSIG
    return parser


@dataclass
class Options:
    profile: Any
    port: int
    kubeconfig: Path
    audit_log: Path | None
    parent_pipe: int | None = None
    ready_fd: int | None = None  # the launcher's readiness pipe: one line once the kubeconfig is written
    controllers: list[str] | None = None  # "module:Class" specs; None = all of controllers.CONTROLLERS
    watch_log_size: int = 20_000  # watch events kept per resource; older resourceVersions get 410 Gone


def prepare(args: argparse.Namespace) -> Options:
    """Validate everything a user can get wrong before anything starts."""
    if not 0 <= args.port <= 65535:
        raise TopsailError(f"--port {args.port}: must be between 0 and 65535")
    kubeconfig = args.kubeconfig.expanduser().absolute()
    problem = check_writable(kubeconfig)
    if problem:
        raise TopsailError(f"--kubeconfig {kubeconfig}: cannot write the kubeconfig: {problem}")
    audit_log = args.audit_log.expanduser().absolute() if args.audit_log else None
    if audit_log is not None and (problem := check_writable(audit_log)):
        raise TopsailError(f"--audit-log {audit_log}: cannot write the audit log: {problem}")
    profile = load_run_profile(args)
    return Options(profile, args.port, kubeconfig, audit_log, args.parent_pipe, args.ready_fd,
                   controllers=[] if args.api_only else None)


def load_run_profile(args: argparse.Namespace) -> Any:
    """The profile of this run (the one place the simulator's profile module is plugged in): the one the launcher
    built (`--built-profile`, read as is), else the user's file and shortcuts, checked here."""
    from pytest_topsail.sim.run.profile import load_built, load_profile

    if args.built_profile is not None:
        return load_built(args.built_profile)
    return load_profile(args.profile, nodes=args.nodes, gpu_profile=args.gpu_profile,
                        gpus_per_node=args.gpus_per_node, seed=args.seed, preinstalled=args.preinstalled)


async def start_run_controllers(store: Store, profile: Any, specs: list[str] | None = None) -> Any:
    """Start the controllers of this run (the one place the controllers are plugged in); returns an object with
    ``async stop()``."""
    from pytest_topsail.sim.controllers import start_controllers

    return await start_controllers(store, profile, specs)


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
    except OSError as error:
        sock.close()
        raise TopsailError(f"--port {port}: cannot listen on 127.0.0.1:{port}: {error.strerror or error}") from None
    return sock


async def serve(options: Options, stop: asyncio.Event | None = None) -> int:
    """Serve until SIGINT/SIGTERM, or until ``stop`` is set when given (then no signal handler is installed, so
    that tests can run the server on a thread)."""
    loop = asyncio.get_running_loop()
    if stop is None:
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
    if options.parent_pipe is not None:
        _watch_parent(loop, options.parent_pipe, stop)
    seed = getattr(options.profile, "seed", 0) or 0
    token = secrets.token_urlsafe(32)
    certificates = make_certificates()
    store = Store(seed=seed, watch_log_size=options.watch_log_size, root_ca=certificates.ca_pem.decode())
    sock = _listen(options.port)
    port = sock.getsockname()[1]
    url = f"https://127.0.0.1:{port}"
    faults = list(getattr(getattr(options.profile, "faults", None), "api", None) or ())
    try:
        server = ApiServer(store, token=token, api_faults=faults, seed=seed, audit_log=options.audit_log,
                           server_address=f"127.0.0.1:{port}")
    except OSError as error:
        sock.close()
        raise TopsailError(f"--audit-log {options.audit_log}: cannot open: {error.strerror or error}") from None
    # Stopping waits shutdown_timeout twice for a request in progress (to end, then once cancelled): a port-forward or
    # exec stream still open would hold every stop for 4 s; a simulator that stops is discarded, so 0.25 s is plenty.
    runner = web.ServerRunner(server.make_server(), handle_signals=False, shutdown_timeout=SHUTDOWN_S)
    await runner.setup()
    controllers = None
    try:
        await web.SockSite(runner, sock, ssl_context=certificates.server_context()).start()
        controllers = await start_run_controllers(store, options.profile, options.controllers)
        for controller in controllers.running:  # components with metrics of their own (Kueue: /metrics/kueue)
            server.component_metrics.update(getattr(controller, "metrics_endpoints", {}))
        write_kubeconfig(options.kubeconfig, url, certificates.ca_pem, token)
        print(f"topsail-sim: serving {url} (kubeconfig {options.kubeconfig}, pid {os.getpid()})", flush=True)
        _signal_ready(options.ready_fd)
        await stop.wait()
        print("topsail-sim: stopping", flush=True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            options.kubeconfig.unlink()
        if controllers is not None:
            await controllers.stop()
        server.close_watches()
        await runner.cleanup()
        server.close()
    return 0


def _signal_ready(fd: int | None) -> None:
    """Tell the launcher waiting on `fd` that the kubeconfig is written (one line, then the pipe is closed)."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, b"ready\n")
    with contextlib.suppress(OSError):
        os.close(fd)


def _watch_parent(loop: asyncio.AbstractEventLoop, fd: int, stop: asyncio.Event) -> None:
    """Stop when the parent's end of the pipe closes (the parent exited, however it died)."""
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            stop.set()

    loop.add_reader(fd, readable)


def _ask_for_parent_death_signal() -> None:
    """Linux: SIGTERM when the parent (the thread that started us) dies; a no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.parent_death_signal:
        _ask_for_parent_death_signal()
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])  # this process only: not in serve(), which tests call
    try:
        options = prepare(args)
        return asyncio.run(serve(options))
    except TopsailError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
