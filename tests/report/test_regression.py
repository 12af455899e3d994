"""Change points and verdicts as functions: agreement with apache-otava on a recorded corpus, verdict rules,
settings validation, summary counts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.regression import (
    RegressionSettings,
    builtin_change_points,
    judge,
    otava_available,
    summarize,
    t_test_pvalue,
)

CORPUS = json.loads((Path(__file__).parent / "data" / "otava_corpus.json").read_text())
CASES = [(case["name"], key, case["series"], run) for case in CORPUS["cases"] for key, run in case["otava"].items()]


@pytest.mark.parametrize(("name", "key", "series", "run"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_builtin_change_points_agree_with_otava(name: str, key: str, series: list[float], run: dict) -> None:
    points = builtin_change_points(series, **run["params"])
    assert [p.index for p in points] == [p["index"] for p in run["change_points"]]
    for mine, theirs in zip(points, run["change_points"], strict=True):
        assert mine.pvalue == pytest.approx(theirs["pvalue"], rel=1e-6, abs=1e-12)


def test_corpus_covers_steps_flat_series_and_outliers() -> None:
    found = [len(run["change_points"]) for _, _, _, run in CASES]
    assert sum(1 for n in found if n == 0) >= 10 and sum(1 for n in found if n >= 2) >= 5


@pytest.mark.skipif(not otava_available(), reason="apache-otava not installed (optional extra)")
def test_otava_engine_matches_the_corpus_when_installed() -> None:
    from pytest_topsail.regression import otava_change_points

    for _, _, series, run in CASES:
        assert [p.index for p in otava_change_points(series, **run["params"])] == \
            [p["index"] for p in run["change_points"]]


def test_t_test_pvalue_matches_known_values() -> None:
    # two samples with means 1 and 3, pooled t = -4.0, 6 degrees of freedom: two-sided p = 0.0071
    pvalue, mean_l, mean_r, _, _ = t_test_pvalue(__import__("numpy").array([0.0, 1, 2, 1]),
                                                 __import__("numpy").array([2.0, 3, 4, 3]))
    assert (mean_l, mean_r) == (1.0, 3.0)
    assert pvalue == pytest.approx(0.0071, abs=2e-4)


def record(value: float, timestamp: float, *, higher_better: bool = True, name: str = "speed",
           ignored: bool = False, uuid: str | None = None) -> dict:
    return {"name": name, "value": value, "unit": "x", "higher_better": higher_better, "timestamp": timestamp,
            "test_uuid": uuid or f"u{timestamp}", "labels": {"size": 1}, "suite": "s", "nodeid": "n",
            "ignored_for_regression": ignored}


def history(values: list[float]) -> list[dict]:
    return [record(v, float(i)) for i, v in enumerate(values)]


def flat(count: int, seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(100, 1) for _ in range(count)]


SETTINGS = RegressionSettings()


def test_verdicts_follow_the_kpi_direction() -> None:
    past = history(flat(30))
    assert judge(record(80, 99.0), past, SETTINGS).status == "regression"
    assert judge(record(120, 99.0), past, SETTINGS).status == "improvement"
    assert judge(record(80, 99.0, higher_better=False), past, SETTINGS).status == "improvement"
    assert judge(record(120, 99.0, higher_better=False), past, SETTINGS).status == "regression"
    accepted = judge(record(100.5, 99.0), past, SETTINGS)
    assert accepted.status == "accepted" and abs(accepted.change_percent) < 2 and accepted.history_size == 30


def test_regression_verdict_reports_change_pvalue_and_reference() -> None:
    verdict = judge(record(80, 99.0), history(flat(30)), SETTINGS)
    assert verdict.change_percent == pytest.approx(-20, abs=1.5)
    assert verdict.reference == pytest.approx(100, abs=1) and verdict.pvalue < SETTINGS.max_pvalue
    assert verdict.change_points[-1] == 30 and verdict.method == "e-divisive"


def test_only_older_records_of_other_tests_are_history() -> None:
    past = history(flat(10)) + [record(50, 200.0), record(50, 99.0, uuid="me")]
    verdict = judge(record(100, 99.0, uuid="me"), past, SETTINGS)
    assert verdict.history_size == 10 and verdict.status == "accepted"


def test_no_history_ignored_and_short_history() -> None:
    assert judge(record(1, 5.0), [], SETTINGS).status == "no_history"
    assert judge(record(1, 5.0, ignored=True), history(flat(30)), SETTINGS).status == "ignored"
    short = judge(record(88, 99.0), history([100, 100, 101]), SETTINGS)
    assert short.status == "regression" and short.method.startswith("short history")
    assert judge(record(95, 99.0), history([100, 100, 101]), SETTINGS).status == "accepted"


def test_an_old_change_point_does_not_condemn_the_current_value() -> None:
    values = flat(20) + [v * 0.7 for v in flat(20, seed=4)]
    verdict = judge(record(70.2, 99.0), history(values), SETTINGS)
    assert verdict.status == "accepted" and verdict.change_points == [20]
    assert verdict.reference == pytest.approx(70, abs=1)


def test_settings_are_validated_with_the_key_named() -> None:
    with pytest.raises(TopsailError, match=r"suite x: regression: unknown key 'windw_len'"):
        RegressionSettings.from_mapping({"windw_len": 3}, where="suite x: regression")
    with pytest.raises(TopsailError, match="regression.engine: Input should be 'auto', 'builtin' or 'otava'"):
        RegressionSettings.from_mapping({"engine": "fast"})
    with pytest.raises(TopsailError, match="regression.comparison_keys: Input should be a valid list, got 'image'"):
        RegressionSettings.from_mapping({"comparison_keys": "image"})  # not the characters i, m, a, g, e
    with pytest.raises(TopsailError, match="regression.fail_on_regression: Input should be a valid boolean"):
        RegressionSettings.from_mapping({"fail_on_regression": "false"})
    settings = RegressionSettings.from_mapping({"comparison_keys": ["image"], "min_history": 3})
    assert settings.comparison_keys == ("image",) and settings.min_history == 3


def test_summary_never_counts_improvements_as_failures() -> None:
    past = history(flat(30))
    verdicts = [judge(record(120, 99.0), past, SETTINGS), judge(record(130, 99.0, name="other"), past, SETTINGS),
                judge(record(70, 99.0, name="bad"), past, SETTINGS), judge(record(1, 9.0), [], SETTINGS)]
    summary = summarize(verdicts, total_points=4)
    assert summary["failures"] == 1 and summary["significant_performance_increase"] == 2
    assert summary["no_history"] == 1 and summary["entries_count"] == 1 and summary["kpis_count"] == 4
    assert summary["regressions"] == [verdicts[2].describe()]
