"""Change points and verdicts as functions: agreement with apache-otava on a recorded corpus, verdict rules,
settings validation, summary counts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.regression import (
    KpiRule,
    RegressionSettings,
    builtin_change_points,
    change_points,
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


def test_a_change_at_the_current_value_is_seen_when_an_earlier_run_takes_the_split() -> None:
    """Five ITL medians, the fifth a little apart, then the decode 4x slower (a run of the slower-decode test at load
    ~11): E-divisive alone splits before the fifth and finds no change point; the current value stands apart."""
    past = history([26.79, 26.64, 26.75, 26.63, 27.97])
    assert change_points([*[r["value"] for r in past], 106.25], SETTINGS) == []  # the case this guards
    slower = judge(record(106.25, 9.0, higher_better=False), past, SETTINGS)
    assert slower.status == "regression" and slower.pvalue < SETTINGS.max_pvalue
    assert slower.change_points == [5] and slower.reference == pytest.approx(26.96, abs=0.01)
    # a run within that spread is accepted: the t-test alone does not condemn it (the noise floor still applies)
    assert judge(record(27.2, 9.0, higher_better=False), past, SETTINGS).status == "accepted"
    # nor does a flat history's ordinary next run
    assert judge(record(99.0, 99.0), history(flat(30)), SETTINGS).status == "accepted"


def test_regression_verdict_reports_change_pvalue_and_reference() -> None:
    verdict = judge(record(80, 99.0), history(flat(30)), SETTINGS)
    assert verdict.change_percent == pytest.approx(-20, abs=1.5)
    assert verdict.reference == pytest.approx(100, abs=1) and verdict.pvalue < SETTINGS.max_pvalue
    assert verdict.change_points[-1] == 30 and verdict.method == "e-divisive"


def test_only_older_records_of_other_tests_are_history() -> None:
    past = history(flat(10)) + [record(50, 200.0), record(50, 99.0, uuid="me")]
    verdict = judge(record(100, 99.0, uuid="me"), past, SETTINGS)
    assert verdict.history_size == 10 and verdict.status == "accepted"


def test_no_history_and_ignored() -> None:
    assert judge(record(1, 5.0), [], SETTINGS).status == "no_history"
    assert judge(record(1, 5.0, ignored=True), history(flat(30)), SETTINGS).status == "ignored"


@pytest.mark.parametrize("points", [1, 2, 3, 4])
def test_fewer_than_n_points_is_insufficient_history_however_large_the_change(points: int) -> None:
    verdict = judge(record(10, 99.0), history([100.0, 100.5, 99.5, 100.2][:points]), SETTINGS)
    assert verdict.status == "insufficient_history" and verdict.history_size == points
    assert verdict.change_percent == pytest.approx(-90, abs=0.5), "the change is still shown"
    assert verdict.method == f"{points} of 5 comparable runs"


def test_n_points_are_enough_and_n_is_a_setting() -> None:
    assert judge(record(10, 99.0), history([100.0, 100.5, 99.5, 100.2, 100.1]), SETTINGS).status == "regression"
    three = RegressionSettings.from_mapping({"min_history": 3})
    assert judge(record(10, 99.0), history([100.0, 100.5, 99.5]), three).status == "regression"


def test_a_change_below_the_min_magnitude_noise_floor_is_accepted() -> None:
    """A flat history makes the t-test significant for any change: the 5 % floor decides (as MatrixBenchmarking,
    the change points themselves are merged below it)."""
    past = history([100.0] * 10)
    small = judge(record(99.2, 99.0), past, SETTINGS)
    assert small.status == "accepted" and small.noise_floor == pytest.approx(5.0)
    assert judge(record(94.0, 99.0), past, SETTINGS).status == "regression"
    loose = RegressionSettings.from_mapping({"min_magnitude": 0.1})
    assert judge(record(94.0, 99.0), past, loose).status == "accepted"


def test_per_kpi_rules_override_the_suite_and_match_globs() -> None:
    settings = RegressionSettings.from_mapping({"min_magnitude": 0.02,
                                                "kpis": {"pod_*_p99_ms": {"min_change": 1000},
                                                         "speed": {"min_magnitude": 0.2}}})
    assert settings.rule("pod_ready_p99_ms").min_change == 1000
    assert settings.rule("pod_ready_p99_ms").min_magnitude == 0.02, "unset keys keep the suite's value"
    past = history([100.0] * 10)
    assert judge(record(85.0, 99.0), past, settings).status == "accepted"
    assert judge(record(85.0, 99.0, name="other"), [{**h, "name": "other"} for h in past], settings).status \
        == "regression"
    zeros = [record(0.0, float(i), name="pod_ready_p99_ms", higher_better=False) for i in range(6)]
    one_tick = judge(record(1000.0, 99.0, name="pod_ready_p99_ms", higher_better=False), zeros, settings)
    assert one_tick.status == "accepted", "one tick of a 1 s timestamp is noise"
    two_ticks = judge(record(2000.0, 99.0, name="pod_ready_p99_ms", higher_better=False), zeros, settings)
    assert two_ticks.status == "regression"


def test_a_noisy_kpi_needs_a_change_beyond_its_variability() -> None:
    rng = random.Random(5)
    noisy = [rng.gauss(100, 10) for _ in range(40)]
    verdict = judge(record(75.0, 99.0), history(noisy), SETTINGS)
    stddev = float(__import__("numpy").std(noisy, ddof=1))
    assert verdict.noise_floor == pytest.approx(3 * stddev) and verdict.noise_floor > 5
    assert verdict.status == "accepted", "-25 % is within 3 standard deviations of this KPI"
    quiet = [100 + (v - 100) / 10 for v in noisy]
    assert judge(record(75.0, 99.0), history(quiet), SETTINGS).status == "regression"
    assert judge(record(40.0, 99.0), history(noisy), SETTINGS).status == "regression"


def test_zero_baseline_lower_is_better_going_up_is_a_regression_with_an_absolute_change() -> None:
    past = [record(0.0, float(i), higher_better=False) for i in range(5)]
    verdict = judge(record(1000.0, 99.0, higher_better=False), past, SETTINGS)
    assert verdict.status == "regression"
    assert verdict.change_percent is None and verdict.change_absolute == 1000.0
    assert verdict.change_text() == "+1000 x (from 0)"
    assert "+1000 x (from 0)" in verdict.describe()
    assert judge(record(1000.0, 99.0), [{**r, "higher_better": True} for r in past], SETTINGS).status \
        == "improvement"
    down = [record(1000.0, float(i), higher_better=False) for i in range(5)]
    assert judge(record(0.0, 99.0, higher_better=False), down, SETTINGS).status == "improvement"


def test_unacknowledged_regressions_stay_out_of_the_baseline() -> None:
    past = history([100.0, 100.5, 99.5, 100.2, 100.1])
    regressed = [{**record(60.0, 50.0 + i), "verdict": "regression", "run_id": f"r{i}"} for i in range(3)]
    verdict = judge(record(60.0, 99.0), past + regressed, SETTINGS)
    assert verdict.status == "regression" and verdict.history_size == 5 and verdict.excluded == 3
    assert [h["baseline"] for h in verdict.history] == [True] * 5 + [False] * 3
    acked = [{**r, "acknowledged": {"reason": "expected"}} for r in regressed]
    verdict = judge(record(60.0, 99.0), past + acked, SETTINGS)
    assert verdict.status == "accepted" and verdict.history_size == 8 and verdict.excluded == 0
    assert verdict.reference == pytest.approx(60.0), "the acknowledged level is the new reference"


def test_an_old_change_point_does_not_condemn_the_current_value() -> None:
    values = flat(20) + [v * 0.7 for v in flat(20, seed=4)]
    verdict = judge(record(70.2, 99.0), history(values), SETTINGS)
    assert verdict.status == "accepted" and verdict.change_points == [20]
    assert verdict.reference == pytest.approx(70, abs=1)


def test_settings_are_validated_with_the_key_named() -> None:
    where = "suite x: regression"  # <file>: <section>: each key named as the user writes it, by the one formatter
    with pytest.raises(TopsailError, match=r"^suite x: invalid regression settings: key regression.windw_len: "
                                           r"unknown key; known: ack_file, comparison_keys"):
        RegressionSettings.from_mapping({"windw_len": 3}, where=where)
    with pytest.raises(TopsailError, match=r"key regression.engine: Input should be 'auto', 'builtin' or 'otava' "
                                           r"\(got 'fast'\)"):
        RegressionSettings.from_mapping({"engine": "fast"}, where=where)
    with pytest.raises(TopsailError, match=r"key regression.comparison_keys: Input should be a valid list \(got "
                                           r"'image'\)"):
        RegressionSettings.from_mapping({"comparison_keys": "image"}, where=where)  # not the characters i, m, a, ...
    with pytest.raises(TopsailError, match="key regression.fail_on_regression: Input should be a valid boolean"):
        RegressionSettings.from_mapping({"fail_on_regression": "false"}, where=where)
    settings = RegressionSettings.from_mapping({"comparison_keys": ["image"], "min_history": 3})
    assert settings.comparison_keys == ["image"] and settings.min_history == 3
    assert (RegressionSettings().min_history, RegressionSettings().min_magnitude) == (5, 0.05)
    with pytest.raises(TopsailError, match=r"key regression.min_magnitude: Input should be a valid number \(got "
                                           r"'big'\)"):
        RegressionSettings.from_mapping({"min_magnitude": "big"}, where=where)
    with pytest.raises(TopsailError, match=r"key regression.kpis.speed.floor: unknown key; known: min_change, "
                                           r"min_magnitude, noise_sigmas"):
        RegressionSettings.from_mapping({"kpis": {"speed": {"floor": 3}}}, where=where)
    with pytest.raises(TopsailError, match=r"key regression.kpis.speed.min_change: Input should be greater than or "
                                           r"equal"):
        RegressionSettings.from_mapping({"kpis": {"speed": {"min_change": -1}}}, where=where)
    with pytest.raises(TopsailError, match=r"^suite x: regression: must be a mapping, not list$"):
        RegressionSettings.from_mapping(["a"], where=where)  # type: ignore[arg-type]


def test_a_kpi_entry_overrides_only_the_keys_it_gives() -> None:
    settings = RegressionSettings.from_mapping({"min_magnitude": 0.02, "noise_sigmas": 4,
                                                "kpis": {"tt_*": {"min_change": 5}, "tt_x": {"min_magnitude": 0.5}}})
    assert settings.rule("tt_x") == KpiRule(min_magnitude=0.02, noise_sigmas=4, min_change=5)  # first match wins
    assert settings.rule("other") == KpiRule(min_magnitude=0.02, noise_sigmas=4, min_change=0)


def test_history_matches_exactly_on_every_label_but_comparison_and_ignored_keys() -> None:
    from pytest_topsail.regression import history_key

    settings = RegressionSettings.from_mapping({"comparison_keys": ["image"], "ignored_keys": ["ocp_version"]})
    base = {"model": "m", "gpus": 8, "image": "v1", "ocp_version": "4.16"}
    assert history_key(base, settings) == history_key({**base, "image": "v2", "ocp_version": "4.17"}, settings)
    assert history_key(base, settings) != history_key({**base, "gpus": 4}, settings)
    assert history_key(base, settings) != history_key({**base, "new_setting": 1}, settings)
    assert history_key(base, settings) != history_key({k: v for k, v in base.items() if k != "gpus"}, settings)


def test_scale_suite_never_pools_different_job_counts_into_one_history() -> None:
    """suites/scale/config.yaml: jobs=5 and jobs=60 (and other workloads, GPU counts) have separate histories."""
    import yaml as yaml_module

    from pytest_topsail.regression import history_key

    config = yaml_module.safe_load((Path(__file__).parents[2] / "suites/scale/config.yaml").read_text())
    settings = RegressionSettings.from_mapping(config["regression"])
    labels = {"workload": "training", "jobs": 5, "gpus": 1, "qps": 20, "cluster": "sim", "node_count": 10}
    for key, other in (("jobs", 60), ("workload", "interactive"), ("gpus", 8)):
        assert history_key(labels, settings) != history_key({**labels, key: other}, settings), key


def test_summary_never_counts_improvements_as_failures() -> None:
    past = history(flat(30))
    verdicts = [judge(record(120, 99.0), past, SETTINGS), judge(record(130, 99.0, name="other"), past, SETTINGS),
                judge(record(70, 99.0, name="bad"), past, SETTINGS), judge(record(1, 9.0), [], SETTINGS)]
    summary = summarize(verdicts, total_points=4)
    assert summary["failures"] == 1 and summary["significant_performance_increase"] == 2
    assert summary["verdicts"]["no_history"] == 1 and summary["entries_count"] == 1 and summary["kpis_count"] == 4
    assert summary["regressions"] == [verdicts[2].describe()]
    assert summary["message"] == "1 KPI regression, 2 improvements"


def test_change_points_of_many_series_at_once_are_those_of_each_series_alone() -> None:
    from pytest_topsail.changepoints import builtin_change_points_many

    by_params: dict[str, list[tuple[list[float], dict]]] = {}
    for _, _, series, run in CASES:
        by_params.setdefault(json.dumps(run["params"], sort_keys=True), []).append((series, run))
    for params, group in by_params.items():
        settings = json.loads(params)
        together = builtin_change_points_many([s for s, _ in group], **settings)
        for (series, run), points in zip(group, together, strict=True):
            assert [p.index for p in points] == [p["index"] for p in run["change_points"]], params
            alone = builtin_change_points(series, **settings)
            assert [p.index for p in points] == [p.index for p in alone]
            assert [p.pvalue for p in points] == pytest.approx([p.pvalue for p in alone], rel=1e-9, abs=1e-15)


def test_each_verdict_explains_its_noise_floor() -> None:
    past = history([100.0, 101.0, 99.0, 100.0, 100.0, 101.0, 99.0])
    accepted = judge(record(100.5, 99.0), past, SETTINGS)
    assert accepted.status == "accepted"
    assert accepted.explanation.startswith("no change point at this value; noise floor 5 x")
    assert "5% of the reference 100 x (5 x)" in accepted.explanation
    assert "3 x the stddev 0.816 x of its 7 runs (2.45 x)" in accepted.explanation
    regression = judge(record(80.0, 99.0), past, SETTINGS)
    assert regression.status == "regression"
    assert regression.explanation.startswith("change -20 x beyond the noise floor 5 x")


def test_a_tail_or_rate_of_few_samples_is_informational_and_says_why() -> None:
    past = history(flat(30))
    few = {**record(60, 99.0), "samples": 5.0}
    verdict = judge(few, past, SETTINGS)
    assert verdict.status == "ignored" and verdict.pvalue is None
    assert "taken from 5 samples, judged from 100 on" in verdict.explanation
    assert judge({**record(60, 99.0), "samples": 500.0}, past, SETTINGS).status == "regression"
    p99 = judge({**record(60, 99.0), "samples": 500.0, "min_samples": 1000.0}, past, SETTINGS)
    assert p99.status == "ignored" and "judged from 1000 on" in p99.explanation
    ignored = judge({**record(60, 99.0, ignored=True), "why": "a maximum moves with one slow sample"}, past, SETTINGS)
    assert ignored.explanation == "informational: a maximum moves with one slow sample"


def test_a_worker_or_run_measurement_is_kept_once_per_scope_key() -> None:
    from pytest_topsail.regression import once_per_scope

    def entry(name: str, scope: str, **labels: str) -> dict:
        return {"suite": "s", "name": name, "scope": scope, "labels": labels}

    seen: set[str] = set()
    first, shared = once_per_scope([entry("latency", "item"), entry("load", "worker", model="a")], seen)
    assert [e["name"] for e in first] == ["latency", "load"] and shared == []
    second, shared = once_per_scope([entry("latency", "item"), entry("load", "worker", model="a"),
                                     entry("load", "worker", model="b"), entry("setup", "run")], seen)
    assert [(e["name"], e["labels"]) for e in second] == [("latency", {}), ("load", {"model": "b"}), ("setup", {})]
    assert [e["labels"] for e in shared] == [{"model": "a"}]


def test_a_machine_bound_change_is_judged_only_at_a_contention_like_its_baselines() -> None:
    def loaded(value: float, timestamp: float, load: float | None) -> dict:
        return {**record(value, timestamp, higher_better=False), "machine_bound": True, "machine_load": load}

    past = [loaded(v, float(i), 2.0 + 0.1 * (i % 3)) for i, v in enumerate(flat(10))]  # 2.0-2.2 runnable per CPU
    busier = judge(loaded(300, 99.0, 4.0), past, SETTINGS)
    assert busier.status == "ignored" and busier.machine_load == 4.0
    assert "busier during this test (4.00 runnable tasks per CPU) than during any of its 10 reference runs " \
           "(at most 2.20)" in busier.explanation and busier.explanation.startswith("not judged: change +200 x")
    same = judge(loaded(300, 99.0, 2.1), past, SETTINGS)  # as busy as its baseline: a slower cluster
    assert same.status == "regression"
    quieter = judge(loaded(50, 99.0, 0.5), past, SETTINGS)
    assert quieter.status == "ignored" and "quieter during this test" in quieter.explanation
    assert judge(loaded(50, 99.0, 2.0), past, SETTINGS).status == "improvement"
    unmeasured = judge(loaded(300, 99.0, None), past, SETTINGS)  # no /proc/loadavg: judged as any KPI
    assert unmeasured.status == "regression"
    not_bound = judge({**loaded(300, 99.0, 4.0), "machine_bound": False}, past, SETTINGS)
    assert not_bound.status == "regression"
    quiet_past = [loaded(v, float(i), 0.4) for i, v in enumerate(flat(10))]  # nothing waited for a CPU
    assert judge(loaded(300, 99.0, 0.9), quiet_past, SETTINGS).status == "regression"
    assert judge(loaded(300, 99.0, 1.5), quiet_past, SETTINGS).status == "ignored"


def test_the_contention_sampler_averages_runnable_tasks_per_cpu_left_by_the_hypervisor(tmp_path: Path) -> None:
    import time

    from pytest_topsail.contention import ContentionSampler, runnable_tasks

    loadavg, stat = tmp_path / "loadavg", tmp_path / "stat"
    loadavg.write_text("9.41 4.51 2.18 9/462 2198\n")
    assert runnable_tasks(loadavg) == 8  # the reader itself excluded

    def stat_with(steal: int, busy: int) -> None:  # user nice system idle iowait irq softirq steal guest guest_nice
        stat.write_text(f"cpu  {busy} 0 0 {10_000 - busy - steal} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")

    for stolen, expected in ((0, 4.0), (2_500, 4.0 / 0.75)):  # a quarter of the CPU time stolen: 3/4 of the CPUs
        stat_with(steal=1_000, busy=3_000)
        sampler = ContentionSampler(interval_s=0.01, path=loadavg, stat_path=stat)
        sampler.cpus = 2
        sampler.start()
        time.sleep(0.05)
        stat.write_text(stat.read_text().replace(" 1000 0 0\n", f" {1_000 + stolen} 0 0\n")
                        .replace("cpu  3000", f"cpu  {3_000 + 10_000 - stolen}"))
        assert sampler.stop() == round(expected, 3), stolen
    assert runnable_tasks(tmp_path / "missing") is None
    assert ContentionSampler(path=tmp_path / "missing").start().stop() is None
    assert ContentionSampler(interval_s=0.01, path=loadavg, stat_path=tmp_path / "missing").start().stop() is not None
