"""Do identical runs stay quiet? Goal: zero regressions and zero improvements (not a benchmark of speed).

    python benchmarks/false_regressions.py [--suites scale,fine_tuning,tgis,llm_load] [--runs 8] [--busy 2] [--ci]

Per suite: ``--runs`` identical smoke runs (``pytest suites -m <suite> --preset smoke``, the simulator's seed fixed by
the suite config) into one fresh history; runs 6 to ``--runs`` are judged against at least 5 earlier runs, and every
regression or improvement among them is a false alarm. ``--busy N`` keeps N busy processes running meanwhile
(benchmarks/busy_load.py), as on a shared CI machine. ``--ci``: a CI-sized selection (one or a few items per suite,
``CI_ITEMS``), the same number of runs. Prints per suite the judged KPIs and the false alarms; exit status 1 when any.
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

REPO = Path(__file__).resolve().parents[1]
SUITES = ("scale", "fine_tuning", "tgis", "llm_load")
FIRST_JUDGED = 6  # runs 1-5 build the history (regression.min_history = 5)
CI_ITEMS = {"scale": "distributed", "fine_tuning": "lora", "tgis": "bf16 and greedy",  # -k: one worker or item
            "llm_load": "tgis and not 1 and not 16"}
RUN_TIMEOUT_S = 300


def run_suite(suite: str, number: int, root: Path, ci: bool) -> tuple[float, list[dict]]:
    command = [sys.executable, "-m", "pytest", "suites", "-m", suite, "--preset", "smoke", "-q",
               "-p", "no:cacheprovider", "-p", "no:randomly", "--artifacts", str(root / f"run{number}"),
               "--topsail-history", str(root / "history.sqlite")]
    if ci and CI_ITEMS.get(suite):
        command += ["-k", CI_ITEMS[suite]]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("ARTIFACT_DIR", None)
    began = time.monotonic()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env,
                            check=False)
    seconds = time.monotonic() - began
    if result.returncode != 0:
        sys.exit(f"{suite} run {number} failed (exit {result.returncode}):\n{result.stdout[-3000:]}"
                 f"\n{result.stderr[-2000:]}")
    return seconds, json.loads((root / f"run{number}" / "verdicts.json").read_text(encoding="utf-8"))


def check_suite(suite: str, runs: int, ci: bool, keep: Path | None) -> tuple[int, list[str], float]:
    """(judged KPI values in the judged runs, false alarms and unjudged runs as lines, seconds)."""
    judged, alarms, total = 0, [], 0.0
    with tempfile.TemporaryDirectory(prefix=f"false-regressions-{suite}-") as tmp:
        root = keep / suite if keep else Path(tmp)
        for number in range(1, runs + 1):
            seconds, verdicts = run_suite(suite, number, root, ci)
            total += seconds
            if number < FIRST_JUDGED:
                continue
            counted = sum(v["status"] in ("accepted", "regression", "improvement") for v in verdicts)
            judged += counted
            if not counted:
                statuses = sorted({v["status"] for v in verdicts})
                alarms.append(f"run {number}: nothing judged ({len(verdicts)} verdicts: {', '.join(statuses)})")
            alarms += [f"run {number} {v['nodeid'].split('::')[-1]} {v['kpi']}: {v['status']} "
                       f"{v['value']:g} {v['unit']} vs {v['reference']:g} ({v.get('explanation', '')})"
                       for v in verdicts if v["status"] in ("regression", "improvement")]
    return judged, alarms, total


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
    unknown = sorted(set(args.suites.split(",")) - set(SUITES))
    if unknown:
        sys.exit(f"--suites: unknown {unknown}; known: {', '.join(SUITES)}")
    load = None
    if args.busy:
        load = subprocess.Popen([sys.executable, str(Path(__file__).with_name("busy_load.py")),
                                 "--processes", str(args.busy), "--seconds", "3600"])
    failed = False
    try:
        for suite in args.suites.split(","):
            judged, alarms, seconds = check_suite(suite, args.runs, args.ci, args.keep)
            failed = failed or bool(alarms)
            print(f"{suite}: {len(alarms)} false alarms (regression, improvement, run not judged) in runs "
                  f"{FIRST_JUDGED}-{args.runs} "
                  f"({judged} judged KPI values, {args.runs} runs in {seconds:.0f} s, busy {args.busy})", flush=True)
            for line in alarms:
                print(f"  {line}", flush=True)
    finally:
        if load is not None:
            load.terminate()
            load.wait(30)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
