"""Benchmark of the TGIS suite's product run (not part of the test run).

    python benchmarks/tgis_product.py [--rounds 2] [--output FILE]

`pytest suites/tgis --preset product` (seven models x 2 configs, 14 TGIS workers, 252 items on the simulator), run
serially and with `-n 2` back to back in each round. Figures: the wall time and CPU time of each (median over
rounds; the CPU time of all the run's processes, steadier than the wall time on a loaded machine), the ratio
-n 2 / serial (median of the rounds' ratios), and the deployments' overlap: the sum of the deployments' durations
over the time at least one was running (1.0: one after another; up to max_parallel_workers when they overlap),
from each worker's `deployment.json` (written by fixtures/tgis_workers.py). Goals: serial <= 90 s, -n 2 <= 0.6x.

`--serving-time-scale 1` serves at real time (the preset compresses serving 20x): the items then take what they take
against a real TGIS, and the ratio shows what `-n 2` does where a run's time is in its items rather than in the
once-per-run start-up (pytest, the simulator, OpenShift AI) that no number of workers shortens.

Python bytecode is cached as in a user's repeated runs, in a private PYTHONPYCACHEPREFIX (nothing written into the
checkout) warmed by one `--collect-only` before timing: without a cache (`--no-bytecode-cache`, i.e.
PYTHONDONTWRITEBYTECODE=1) each process of the run, the controller and every xdist worker, compiles and
assertion-rewrites pytest_topsail again (about 10 s each on a loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 900


def environment(pycache: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("ARTIFACT_DIR", None)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE")
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def run(mode: list[str], directory: Path, pycache: Path | None, extra: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "suites/tgis", "--preset", "product", "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "--artifacts", str(directory / "artifacts"), "--topsail-history",
               str(directory / "history.sqlite"), *extra, *mode]
    began, cpu = time.monotonic(), cpu_seconds()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S,
                            env=environment(pycache))
    wall, cpu = time.monotonic() - began, cpu_seconds() - cpu
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout[-3000:]}")
    windows = [json.loads(path.read_text()) for path in (directory / "artifacts").glob("*/deployment.json")]
    return {"wall_s": wall, "cpu_s": cpu, "deployments": len(windows), "overlap": overlap(windows),
            "summary": result.stdout.strip().splitlines()[-1]}


def cpu_seconds() -> float:
    """User + system CPU of the finished child processes (pytest, its xdist workers and simulator included): what
    the run costs whatever the machine's load."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def overlap(windows: list[dict[str, Any]]) -> float:
    """Sum of the deployment durations / their union (1.0 = strictly one after another)."""
    spans = sorted((w["began"], w["ready"]) for w in windows)
    total = sum(end - start for start, end in spans)
    union, current_start, current_end = 0.0, None, None
    for start, end in spans:
        if current_end is None or start > current_end:
            union += (current_end - current_start) if current_end is not None else 0.0
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    union += (current_end - current_start) if current_end is not None else 0.0
    return total / union if union else 0.0


def measure_round(number: int, pycache: Path | None, extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as serial_dir, tempfile.TemporaryDirectory() as parallel_dir:
        serial = run([], Path(serial_dir), pycache, extra)
        parallel = run(["-n", "2"], Path(parallel_dir), pycache, extra)
    ratio = parallel["wall_s"] / serial["wall_s"]
    print(f"round {number + 1}: serial {serial['wall_s']:.1f} s (CPU {serial['cpu_s']:.1f} s, overlap "
          f"{serial['overlap']:.2f}), -n 2 {parallel['wall_s']:.1f} s (CPU {parallel['cpu_s']:.1f} s, overlap "
          f"{parallel['overlap']:.2f}), ratio {ratio:.2f}; "
          f"{serial['summary']}; load {os.getloadavg()[0]:.1f}", flush=True)
    return {"serial": serial, "n2": parallel, "ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="PYTHONDONTWRITEBYTECODE=1: every process compiles pytest_topsail again")
    parser.add_argument("--serving-time-scale", type=float, help="real seconds per simulated second of serving "
                        "(the product preset's 0.05 unless given; 1: real time)")
    args = parser.parse_args()
    extra = [] if args.serving_time_scale is None else [
        "--var", f"cluster.sim.plugins.kserve.serving_time_scale={args.serving_time_scale}"]
    with tempfile.TemporaryDirectory() as pycache_dir:
        pycache = None if args.no_bytecode_cache else Path(pycache_dir)
        if pycache is not None:  # warm the cache (xdist's modules too) before timing
            subprocess.run([sys.executable, "-m", "pytest", "suites/tgis", "--preset", "product", "--collect-only",
                            "-q", "-p", "no:cacheprovider", "-n", "2"], cwd=REPO, capture_output=True,
                           timeout=TIMEOUT_S, env=environment(pycache))
        rounds = [measure_round(number, pycache, extra) for number in range(args.rounds)]
    figures = {
        "serial_s": statistics.median(r["serial"]["wall_s"] for r in rounds),
        "n2_s": statistics.median(r["n2"]["wall_s"] for r in rounds),
        "ratio": statistics.median(r["ratio"] for r in rounds),
        "serial_cpu_s": statistics.median(r["serial"]["cpu_s"] for r in rounds),
        "n2_cpu_s": statistics.median(r["n2"]["cpu_s"] for r in rounds),
        "overlap_serial": statistics.median(r["serial"]["overlap"] for r in rounds),
        "overlap_n2": statistics.median(r["n2"]["overlap"] for r in rounds),
        "bytecode_cache": pycache is not None,
        "serving_time_scale": args.serving_time_scale or "the preset's",
        "goals": {"serial_s": 90, "ratio": 0.6},
    }
    print(json.dumps(figures, indent=1))
    if args.output:
        args.output.write_text(json.dumps({"figures": figures, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
