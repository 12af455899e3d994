"""README line 1, timed: `pytest suites --preset smoke` (not part of the test run).

    python benchmarks/smoke.py [--rounds 3] [--baseline /path/to/other/checkout] [--bytecode] [--chain]

Runs the smoke preset of every suite from this checkout (PYTHONPATH set to it, so its `pytest_topsail` is the one
imported, by the simulator subprocesses too) and prints the wall time and the CPU time (user + system of pytest and
every child: simulators, servers). With --baseline, the same run from another checkout alternates with this one in
each round, and the medians are printed side by side with their ratio. Goal: <= 20 s wall on a quiet machine; on a
loaded one the CPU time says more (the run is mostly waiting on simulated time and child processes). --bytecode
drops PYTHONDONTWRITEBYTECODE (set on the development machines), as a user's second run: with it set, every run
compiles pytest_topsail from source and pytest rewrites the assertions of its 146 modules (a plugin's). --chain
alternates the run as it is (a bare simulator, every suite's cluster.stack prepared: docs/fresh-cluster.md) with the
same run on a pre-provisioned simulator and no stack (`--var cluster.stack=[] --var cluster.sim.preinstalled=all`):
the difference of the medians is what the preparation chain costs (goal <= 3 s).

Measured 2026-11-25 (2 shared cores, medians of 3; figures: docs/writing-a-suite.md), this tree vs the one before
the smoke work of issue 28 (c4586a4): load 0.6-3.0: 18.7 s wall, 7.8 s CPU vs 38.3 s, 9.4 s (0.49x, 0.83x: goal
met); load 6-8: 29.2 s, 8.7 s vs 52.8 s, 10.7 s (0.55x, 0.82x); --bytecode at load 6-8 with a test run alongside:
33.4 s, 8.5 s vs 56.6 s, 9.9 s (0.59x, 0.86x).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 20.0
HERE = Path(__file__).resolve().parents[1]


PREPROVISIONED = ("--var", "cluster.stack=[]", "--var", "cluster.sim.preinstalled=all")
CHAIN_GOAL_S = 3.0


def one_run(tree: Path, timeout_s: float, bytecode: bool = False, extra: tuple[str, ...] = ()
            ) -> tuple[float, float, bool]:
    """(wall s, CPU s of the run and its children, passed) of one smoke run from checkout `tree`, with its own
    artifacts and an empty history (a checkout's accumulated history would make its regression analysis and report
    costlier than the other's). `bytecode`: Python may write and reuse its bytecode caches, as on a user's machine
    (also pytest's cache of the assertion-rewritten modules: every pytest_topsail module, as a plugin's)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("ARTIFACT_DIR", None)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="topsail-bench-smoke-") as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        completed = subprocess.run([sys.executable, "-m", "pytest", "suites", "--preset", "smoke", "-q", "-p",
                                    "no:randomly", "-p", "no:cacheprovider", "--artifacts", f"{tmp}/artifacts",
                                    "--topsail-history", f"{tmp}/history.sqlite", *extra], cwd=tree, env=env,
                                   timeout=timeout_s, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if completed.returncode != 0:
        print(completed.stdout.decode(errors="replace")[-2000:])
    return wall, cpu, completed.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout, run alternately in each round")
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    parser.add_argument("--bytecode", action="store_true",
                        help="let Python write and reuse bytecode caches (dropped PYTHONDONTWRITEBYTECODE), as a "
                             "user's second run does; the first round fills the caches")
    parser.add_argument("--chain", action="store_true",
                        help="also run this checkout on a pre-provisioned simulator without the preparation chain")
    args = parser.parse_args()
    trees = {"this": (HERE, ())} | ({"baseline": (args.baseline.resolve(), ())} if args.baseline else {}) | (
        {"preprovisioned": (HERE, PREPROVISIONED)} if args.chain else {})
    runs: dict[str, list[tuple[float, float, bool]]] = {name: [] for name in trees}
    for round_index in range(args.rounds):
        for name, (tree, extra) in trees.items():
            runs[name].append(one_run(tree, args.timeout, args.bytecode, extra))
            wall, cpu, passed = runs[name][-1]
            verdict = "passed" if passed else "FAILED"
            print(f"round {round_index + 1} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, {verdict} "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    medians = {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
               for name, rs in runs.items()}
    wall, cpu = medians["this"]
    print(f"median this: {wall:.1f} s wall, {cpu:.1f} s CPU (goal <= {GOAL_S:g} s wall on a quiet machine: "
          f"{'met' if wall <= GOAL_S else 'MISSED'}; load {os.getloadavg()[0]:.1f})")
    if "baseline" in medians:
        base_wall, base_cpu = medians["baseline"]
        print(f"median baseline: {base_wall:.1f} s wall, {base_cpu:.1f} s CPU; this / baseline: "
              f"wall {wall / base_wall:.2f}, CPU {cpu / base_cpu:.2f}")
    if "preprovisioned" in medians:
        pre_wall, pre_cpu = medians["preprovisioned"]
        print(f"median pre-provisioned, no chain: {pre_wall:.1f} s wall, {pre_cpu:.1f} s CPU; the chain adds "
              f"{wall - pre_wall:+.1f} s wall (goal <= {CHAIN_GOAL_S:g} s), {cpu - pre_cpu:+.1f} s CPU")
    return 0 if all(passed for rs in runs.values() for _, _, passed in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
