"""A run stopped in the middle (SIGTERM from a CI time limit or ``timeout``; Ctrl-C) still writes its outputs
for the items that finished, and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.report.conftest import read_json, report_text

ROOT = Path(__file__).resolve().parents[2]


def finished_items(artifacts: Path) -> list[Path]:
    return sorted(artifacts.glob("llm_load/*/item.json"))


def test_sigterm_in_the_middle_of_a_run_leaves_a_report_of_the_finished_items(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    command = [sys.executable, "-m", "pytest", "suites", "-m", "llm_load", "--preset", "smoke", "-p", "no:randomly",
               "-p", "no:cacheprovider", f"--artifacts={artifacts}", f"--topsail-history={tmp_path / 'h.sqlite'}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ARTIFACT_DIR", None)
    with open(tmp_path / "out.log", "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 240
            while len(finished_items(artifacts)) < 2 and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert process.poll() is None, "the run ended before it could be interrupted"
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=120) == 2, "pytest's exit status for an interrupted run"
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    output = (tmp_path / "out.log").read_text(errors="replace")
    finished = [read_json(path)["nodeid"] for path in finished_items(artifacts)]
    assert 2 <= len(finished) < 6, output
    assert f"topsail: run interrupted (SIGTERM): the outputs cover the {len(finished)} of 6 items that finished" \
        in output, output
    report = report_text(artifacts / "report.html")
    assert f"Run interrupted (SIGTERM): this report covers the {len(finished)} of 6 items that finished." in report
    rows = [line for line in report.splitlines() if 'class="item"' in line]
    assert sorted(row.split('title="', 1)[1].split('"', 1)[0] for row in rows) == sorted(finished), \
        "one matrix row per finished item"
    summary = yaml.safe_load((artifacts / "regression_summary.yaml").read_text())
    assert summary["interrupted"] == "SIGTERM" and summary["entries_count"] == len(finished)


def test_a_signal_while_a_record_is_processed_comes_after_it() -> None:
    """The controller processes a finished item's record (verdicts, junit, files) whole; Ctrl-C or SIGTERM that
    arrives meanwhile is delivered after it, to the handlers that were in place, and only once."""
    import pytest

    from pytest_topsail.report.plugin import signals_held

    steps: list[str] = []
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # an xdist worker may ignore SIGINT
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("the record processed")
    assert steps == ["the record processed"]
    assert signal.signal(signal.SIGINT, before) is signal.default_int_handler

    terms: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, _frame: terms.append(number))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            steps.append("another record")
        assert terms == [signal.SIGTERM] and steps[-1] == "another record"
    finally:
        signal.signal(signal.SIGTERM, previous)
