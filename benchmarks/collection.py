"""Benchmark of case collection (not part of the test run).

    python benchmarks/collection.py [--cases 10000] [--repeat 5]

Two temporary projects collect the same N test ids with ``pytest --collect-only -q``, run side by side (alternating)
in fresh interpreters:

- topsail: a suite whose ``config.yaml`` names one case file of N YAML cases (``name`` + settings), parametrized by the
  engine (YAML read, validated, matrix-expanded, ids checked, suite marker added);
- baseline: one test module with plain ``@pytest.mark.parametrize`` of the same N ids and settings dicts.

Measured inside each run, from the start of configuration (a ``-p`` plugin imported before the other plugins are
configured) to the end of collection; start-up of the interpreter and of pytest is reported separately as wall time.
Measured twice for topsail: a first run (``--cache-clear``: every case file parsed) and a next run (parsed case
files read back from pytest's cache, checked against a hash of each file). CPU time is the headline figure (the
machine may be shared); elapsed and wall times are printed beside it. Medians of ``--repeat`` runs;
goal: topsail / baseline <= 1.5.

A third figure checks that the plugin costs nothing measurable in a run that collects no suite: the wall time of
``pytest --collect-only`` on a small ordinary project, with the plugin and with ``-p no:topsail``.

``--cache-bytecode``: the runs may write and read compiled bytecode (in a private ``PYTHONPYCACHEPREFIX``, after one
untimed round), as any installation does; without it, an environment with ``PYTHONDONTWRITEBYTECODE=1`` compiles
(and assertion-rewrites) the engine's modules in every run, while the baseline's pytest comes precompiled.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_RATIO = 1.5

TIMER_PLUGIN = '''
import json, os, time
import pytest

_START = time.perf_counter()
_START_CPU = time.process_time()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    with open(os.environ["BENCH_TIMINGS"], "a") as out:
        out.write(json.dumps({"seconds": time.perf_counter() - _START, "cpu": time.process_time() - _START_CPU,
                              "items": len(session.items)}) + "\\n")
'''

BASELINE_MODULE = '''
import pytest

CASES = [({"jobs": index % 7, "qps": 20, "workload": "training", "gpus": 1 + index % 4}, f"case-{index:05d}")
         for index in range({count})]


@pytest.mark.parametrize("case", [pytest.param(settings, id=case_id) for settings, case_id in CASES])
def test_case(case):
    pass
'''

SUITE_MODULE = '''
def test_case(case):
    pass
'''


def write_projects(root: Path, count: int) -> tuple[Path, Path, Path]:
    topsail = root / "topsail"
    (topsail / "suites" / "bench").mkdir(parents=True)
    (topsail / "cases").mkdir()
    (topsail / "pytest.ini").write_text("[pytest]\n")
    (topsail / "suites" / "bench" / "config.yaml").write_text("cases: [cases/bench.yaml]\n")
    (topsail / "suites" / "bench" / "test_bench.py").write_text(SUITE_MODULE)
    lines = []
    for index in range(count):
        lines.append(f"- name: case-{index:05d}\n  jobs: {index % 7}\n  qps: 20\n  workload: training\n"
                     f"  gpus: {1 + index % 4}\n")
    (topsail / "cases" / "bench.yaml").write_text("".join(lines))

    baseline = root / "baseline"
    (baseline / "tests").mkdir(parents=True)
    (baseline / "pytest.ini").write_text("[pytest]\n")
    (baseline / "tests" / "test_bench.py").write_text(BASELINE_MODULE.replace("{count}", str(count)))

    ordinary = root / "ordinary"
    (ordinary / "tests").mkdir(parents=True)
    (ordinary / "pytest.ini").write_text("[pytest]\n")
    (ordinary / "tests" / "test_plain.py").write_text("def test_one():\n    pass\n")

    (root / "bench_timer.py").write_text(TIMER_PLUGIN)
    return topsail, baseline, ordinary


def collect(project: Path, target: str, timer_dir: Path, extra: list[str], bytecode: bool = False
            ) -> dict[str, float]:
    """Timings of one ``pytest --collect-only`` run: configuration + collection (``seconds``, ``cpu``), ``wall``."""
    timings = timer_dir / "timings.jsonl"
    timings.unlink(missing_ok=True)
    env = {**os.environ, "BENCH_TIMINGS": str(timings),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(timer_dir), os.environ.get("PYTHONPATH", "")]))}
    env.pop("ARTIFACT_DIR", None)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(timer_dir / "pycache")
    command = [sys.executable, "-m", "pytest", target, "--collect-only", "-q", "-p", "bench_timer", *extra]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"pytest failed in {project}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return {**json.loads(timings.read_text().splitlines()[-1]), "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cache-bytecode", action="store_true", help="bytecode written and read, as installed")
    args = parser.parse_args()
    bytecode = args.cache_bytecode

    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ("cold", "warm", "baseline", "plugin", "no-plugin")}
    with tempfile.TemporaryDirectory(prefix="topsail-bench-collection-") as tmp:
        root = Path(tmp)
        topsail, baseline, ordinary = write_projects(root, args.cases)
        if bytecode:  # one untimed round compiles every module into the private bytecode cache
            collect(topsail, "suites", root, [], bytecode)
            collect(baseline, "tests", root, [], bytecode)
            collect(ordinary, "tests", root, [], bytecode)
        for _ in range(args.repeat):  # alternate, so that machine load affects both sides alike
            runs["cold"].append(collect(topsail, "suites", root, ["--cache-clear"], bytecode))
            runs["warm"].append(collect(topsail, "suites", root, [], bytecode))
            runs["baseline"].append(collect(baseline, "tests", root, [], bytecode))
            runs["plugin"].append(collect(ordinary, "tests", root, [], bytecode))
            runs["no-plugin"].append(collect(ordinary, "tests", root, ["-p", "no:topsail"], bytecode))

    for name in ("cold", "warm", "baseline"):
        items = {run["items"] for run in runs[name]}
        if items != {args.cases}:
            raise SystemExit(f"{name}: collected {items} items, expected {args.cases}")

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[name])

    def ratio(key: str, name: str, base: str = "baseline") -> float:
        return median(name, key) / median(base, key)

    print(f"collection of {args.cases} cases: configuration + collection, median of {args.repeat} runs "
          f"({'bytecode cached' if bytecode else 'bytecode as the environment says'}, load {os.getloadavg()[0]:.1f})")
    labels = {"cold": "topsail, first run (YAML parsed)", "warm": "topsail, next runs (parsed cases cached)",
              "baseline": "plain pytest.mark.parametrize"}
    for name, label in labels.items():
        print(f"  {label:41s} cpu {median(name, 'cpu'):6.3f} s   elapsed {median(name, 'seconds'):6.3f} s   "
              f"wall incl. start-up {median(name, 'wall'):6.3f} s")
    for name in ("cold", "warm"):
        verdict = "ok" if ratio("cpu", name) <= GOAL_RATIO else "ABOVE GOAL"
        print(f"  ratio {name}/baseline: cpu {ratio('cpu', name):.2f} (goal <= {GOAL_RATIO}: {verdict}), "
              f"elapsed {ratio('seconds', name):.2f}, wall incl. start-up {ratio('wall', name):.2f}")
    print("run without any suite (1 test): plugin installed vs -p no:topsail, wall incl. start-up")
    print(f"  with {median('plugin', 'wall'):6.3f} s   without {median('no-plugin', 'wall'):6.3f} s   "
          f"ratio {ratio('wall', 'plugin', 'no-plugin'):.2f}")


if __name__ == "__main__":
    main()
