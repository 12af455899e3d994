"""The report context: each suite's report settings resolved once per session from its loaded configuration, the
defaults (and one problem line) for a suite that does not load."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.report.context import ReportContext

DOCUMENT = {"regression": {"min_history": 3, "fail_on_regression": True}, "report": {"headline_kpis": ["tps"]},
            "history": {"location": "perf/history.sqlite"}, "lts": {"strict": True}, "token": "s3cr3t"}


def pytest_config(tmp_path: Path, history: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(getoption=lambda name, default=None: history if name == "topsail_history" else default,
                           rootpath=tmp_path, invocation_params=SimpleNamespace(dir=tmp_path))


def test_each_suite_is_resolved_once_per_session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    loads: list[str] = []
    suite = SimpleNamespace(config=Config(DOCUMENT, source="suites/demo/config.yaml"), presets_applied=["smoke"],
                            path=tmp_path / "suites/demo")
    monkeypatch.setattr("pytest_topsail.suites.load_suite", lambda config, name: loads.append(name) or suite)
    context = ReportContext(pytest_config(tmp_path), [], [])  # type: ignore[arg-type]
    for _ in range(3):
        demo = context.suite("demo")
    assert loads == ["demo"]
    assert (demo.regression.min_history, demo.regression.fail_on_regression, demo.lts_strict) == (3, True, True)
    assert demo.report_settings == {"headline_kpis": ["tps"]} and demo.presets == ["smoke"]
    assert demo.history_location == str(tmp_path / "perf/history.sqlite")
    assert demo.ack_file == tmp_path / "suites/demo/acks.yaml"


def test_a_suite_that_does_not_load_gets_the_defaults_and_one_problem_line(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    def broken(config: object, name: str) -> None:
        raise TopsailError(f"no suite {name!r}")

    monkeypatch.setattr("pytest_topsail.suites.load_suite", broken)
    problems: list[str] = []
    context = ReportContext(pytest_config(tmp_path, history="h.sqlite"), problems, [])  # type: ignore[arg-type]
    gone = context.suite("gone")
    context.suite("gone")
    assert problems == ["suite gone: no suite 'gone'; default regression settings used"]
    assert gone.regression.min_history == 5 and gone.history_location == str(tmp_path / "h.sqlite")
    with pytest.raises(TopsailError, match="no suite 'gone'"):
        gone.kpis(pytest_config(tmp_path))  # type: ignore[arg-type]
