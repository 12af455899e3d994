"""Do identical runs stay quiet? Goal: zero regressions and zero improvements (not a benchmark of speed).

    python benchmarks/false_regressions.py [--suites scale,fine_tuning,tgis,llm_load] [--runs 8] [--busy 2] [--ci]

``--runs`` identical smoke runs of the suites, all of them in one pytest invocation per run (``pytest suites -m
"scale or ..." --preset smoke``, the simulator's seed fixed by each suite config), into one fresh history; runs 6 to
``--runs`` are judged against at least 5 earlier runs, and every regression or improvement among them is a false
alarm. ``--busy N`` keeps N busy processes running meanwhile (benchmarks/busy_load.py), as on a shared CI machine.
``--ci``: a CI-sized selection (one or a few items per suite, ``CI_ITEMS``), the same number of runs: the CI gate
(.ci/run). Prints per suite the judged KPIs and the false alarms, and the machine's load; exit status 1 when any.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_topsail.contention import cpu_times, steal_share

REPO = Path(__file__).resolve().parents[1]
SUITES = ("scale", "fine_tuning", "tgis", "llm_load")
FIRST_JUDGED = 6  # runs 1-5 build the history (regression.min_history = 5)
CI_ITEMS = {"scale": "test_scale and distributed", "fine_tuning": "test_fine_tuning and lora",  # -k: one item
            "tgis": "test_tgis and bf16 and greedy and basic and not stream",
            "llm_load": "test_llm_load and tgis and not 1 and not 16"}
RUN_TIMEOUT_S = {True: 300, False: 1200}  # one run of every suite chosen: CI-sized, whole smoke presets


def run_suites(suites: list[str], number: int, root: Path, ci: bool) -> tuple[float, float, float, list[dict]]:
    """One run of every suite chosen, in one pytest invocation: (seconds, load average after it, the share of CPU
    time a hypervisor took meanwhile, verdicts)."""
    command = [sys.executable, "-m", "pytest", "suites", "-m", " or ".join(suites), "--preset", "smoke", "-q",
               "-p", "no:cacheprovider", "-p", "no:randomly", "--artifacts", str(root / f"run{number}"),
               "--topsail-history", str(root / "history.sqlite")]
    if ci:
        command += ["-k", " or ".join(f"({CI_ITEMS[suite]})" for suite in suites)]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("ARTIFACT_DIR", None)
    began, cpu_before = time.monotonic(), cpu_times()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S[ci], env=env,
                            check=False)
    seconds, stolen = time.monotonic() - began, steal_share(cpu_before, cpu_times())
    if result.returncode != 0:
        sys.exit(f"run {number} failed (exit {result.returncode}):\n{result.stdout[-3000:]}"
                 f"\n{result.stderr[-2000:]}")
    verdicts = json.loads((root / f"run{number}" / "verdicts.json").read_text(encoding="utf-8"))
    return seconds, os.getloadavg()[0], stolen, verdicts


def alarms_of(suite: str, number: int, verdicts: list[dict]) -> tuple[int, list[str]]:
    """(judged KPI values of the suite in this run, its false alarms and 'nothing judged' as lines)."""
    mine = [v for v in verdicts if v["suite"] == suite]
    judged = sum(v["status"] in ("accepted", "regression", "improvement") for v in mine)
    alarms = [] if judged else [f"run {number}: nothing judged ({len(mine)} verdicts: "
                                f"{', '.join(sorted({v['status'] for v in mine}))})"]
    alarms += [f"run {number} {v['nodeid'].split('::')[-1]} {v['kpi']}: {v['status']} "
               f"{v['value']:g} {v['unit']} vs {v['reference']:g} ({v.get('explanation', '')})"
               for v in mine if v["status"] in ("regression", "improvement")]
    return judged, alarms


def check(suites: list[str], runs: int, ci: bool, keep: Path | None) -> tuple[dict[str, tuple[int, list[str]]],
                                                                            list[tuple[float, float]]]:
    """Per suite (judged KPI values in the judged runs, false alarms), and per run (seconds, load average)."""
    found: dict[str, tuple[int, list[str]]] = {suite: (0, []) for suite in suites}
    timing = []
    with tempfile.TemporaryDirectory(prefix="false-regressions-") as tmp:
        root = keep if keep else Path(tmp)
        for number in range(1, runs + 1):
            seconds, load, stolen, verdicts = run_suites(suites, number, root, ci)
            timing.append((seconds, load))
            print(f"run {number}: {seconds:.0f} s, load average {load:.1f}, CPU steal {stolen:.1%}", flush=True)
            if number < FIRST_JUDGED:
                continue
            for suite in suites:
                judged, alarms = alarms_of(suite, number, verdicts)
                found[suite] = (found[suite][0] + judged, found[suite][1] + alarms)
    return found, timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--busy", type=int, default=0, help="background busy processes during the runs")
    parser.add_argument("--ci", action="store_true", help="CI-sized: a few items per suite")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep each suite's runs and history under DIR/<suite> (default: a temporary directory)")
    args = parser.parse_args()
    if args.runs < FIRST_JUDGED:
        sys.exit(f"--runs {args.runs}: at least {FIRST_JUDGED} (5 to build the history, then judged runs)")
    suites = args.suites.split(",")
    unknown = sorted(set(suites) - set(SUITES))
    if unknown:
        sys.exit(f"--suites: unknown {unknown}; known: {', '.join(SUITES)}")
    load = None
    if args.busy:
        load = subprocess.Popen([sys.executable, str(Path(__file__).with_name("busy_load.py")),
                                 "--processes", str(args.busy), "--seconds", "3600"])
    try:
        found, timing = check(suites, args.runs, args.ci, args.keep)
    finally:
        if load is not None:
            load.terminate()
            load.wait(30)
    seconds, loads = sum(t for t, _ in timing), [load for _, load in timing]
    print(f"{args.runs} runs of {', '.join(suites)} in {seconds:.0f} s (busy {args.busy}, load average "
          f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs)")
    for suite, (judged, alarms) in found.items():
        print(f"{suite}: {len(alarms)} false alarms (regression, improvement, run not judged) in runs "
              f"{FIRST_JUDGED}-{args.runs} ({judged} judged KPI values)", flush=True)
        for line in alarms:
            print(f"  {line}", flush=True)
    sys.exit(1 if any(alarms for _, alarms in found.values()) else 0)


if __name__ == "__main__":
    main()
