"""A load generator pod's entry point: ``python -m pytest_topsail.llmload.worker [settings directory] [records
directory]`` (defaults ``/etc/topsail-load`` and ``/records``), run by every pod of a distributed load test
(distributed.py, docs/llm-load.md "Distributed load").

The settings directory (the mounted ConfigMap) holds ``load.json`` (the case's load settings, the endpoint, the start
barrier ``start_at`` as epoch seconds and ``late_s``) and ``prompts.jsonl``. The worker waits for ``start_at``, runs
the one load point, and writes into the records directory ``<pod>.jsonl`` (one line per request as it ends, flushed,
as the runner pulls them while the pod runs) and ``<pod>.json`` (the point: its start on the wall clock, then its
window when it ended). With ``TOPSAIL_LOAD_PORT`` set (the Job sets it), it serves both on that port until the runner
has collected them (collect.py; at most ``collect_timeout_s``, then it exits anyway; ``TOPSAIL_LOAD_API_KEY``, from
the run's Secret, is the OpenAI backend's key). A pod starting more than ``late_s`` after ``start_at`` missed the
barrier: it
sends nothing and exits 0 (a replacement the Job creates for a lost pod must not churn the Job; the runner names the
lost pod). Exit codes: 0 done (or barrier missed), 2 bad settings.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends import Backend
from pytest_topsail.llmload.collect import PORT_ENV, RecordServer
from pytest_topsail.llmload.dataset import Prompt, load_dataset
from pytest_topsail.llmload.generator import LoadPoint, PointResult, PointRun
from pytest_topsail.llmload.records import RequestRecord, relative_dict

SETTINGS_FILE, PROMPTS_FILE = "load.json", "prompts.jsonl"
API_KEY_ENV = "TOPSAIL_LOAD_API_KEY"  # the OpenAI backend's key, from the run's Secret (secretKeyRef)
TERMINATION_LOG = Path("/dev/termination-log")


def main(argv: list[str]) -> int:
    settings_dir = Path(argv[0] if argv else "/etc/topsail-load")
    out = Path(argv[1] if len(argv) > 1 else "/records")
    name = socket.gethostname()
    try:
        config = json.loads((settings_dir / SETTINGS_FILE).read_text(encoding="utf-8"))
        from pytest_topsail.llmload.settings import LoadSettings

        settings = LoadSettings.parse(config["settings"], f"{settings_dir / SETTINGS_FILE}: settings")
        prompts = load_dataset(settings_dir / PROMPTS_FILE)
        backend = settings.make_backend(http_url=config.get("http_url"), grpc_target=config.get("grpc_target"),
                                        served_model=config.get("served_model"), rootdir=settings_dir,
                                        api_key=os.environ.get(API_KEY_ENV) or None)
        point = settings.load_point()
        start_at, late_s = float(config["start_at"]), float(config.get("late_s", 1.0))
    except (OSError, KeyError, ValueError, TopsailError) as error:
        return fail(f"generator {name}: bad settings in {settings_dir}: {error}", 2)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # records are on disk already; end at once
    if time.time() - start_at > late_s:  # e.g. the Job's replacement of a lost pod: it must not churn the Job
        print(f"generator {name}: started {time.time() - start_at:.1f} s after the start barrier (more than "
              f"late_s={late_s:g}): sending nothing", flush=True)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").unlink(missing_ok=True)
    port = os.environ.get(PORT_ENV)
    server = RecordServer(int(port), out / f"{name}.jsonl", out / f"{name}.json") if port else None
    document: dict[str, Any] = {"generator": name, "barrier_epoch": start_at}
    with (out / f"{name}.jsonl").open("w", encoding="utf-8") as records:

        def save(record: RequestRecord, t0: float) -> None:
            records.write(json.dumps(relative_dict(record, t0), separators=(",", ":")) + "\n")
            records.flush()

        result = asyncio.run(at_barrier(backend, prompts, point, start_at, save, out / f"{name}.json", document))
    document.update(measure_start=result.measure_start, measure_end=result.measure_end, stop=result.stop,
                    ended=result.ended, client=result.client,
                    requests=len(result.records), stopped_by=result.stopped_by)
    (out / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")
    print(f"generator {name}: {document['requests']} requests, started {document['started_epoch']:.3f}", flush=True)
    if server is not None and not server.wait_collected(float(config.get("collect_timeout_s", 120.0))):
        print(f"generator {name}: nobody collected the records within collect_timeout_s", flush=True)
    return 0


async def at_barrier(backend: Backend, prompts: list[Prompt], point: LoadPoint, start_at: float,
                     save: Callable[[RequestRecord, float], None], path: Path, document: dict[str, Any]
                     ) -> PointResult:
    """Connect, sleep until the barrier, run the point (the connection is ready before the barrier, so the pods'
    first requests leave together)."""
    point.check("load point")
    await backend.open()
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        run = PointRun(backend, prompts, point, 0, save)
        document["started_epoch"] = time.time()
        path.write_text(json.dumps(document), encoding="utf-8")
        return await run.run()
    finally:
        await backend.close()


def fail(message: str, code: int) -> int:
    print(message, file=sys.stderr, flush=True)
    if TERMINATION_LOG.is_file():  # mounted by the kubelet in a container; never created outside one
        try:
            TERMINATION_LOG.write_text(message[:4000], encoding="utf-8")
        except OSError:
            pass
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
