"""Verdicts against the SQLite history across sessions: regression / improvement / accepted / no_history,
direction honoured, ignored KPIs skipped, comparison and ignored keys, fail_on_regression, replot."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import yaml

from tests.report.conftest import Project, read_json, seed_both

Noisy = Callable[..., list[float]]


def verdicts_of(project: Project, session: str) -> dict[tuple[str, str], dict]:
    verdicts = read_json(project.artifacts(session) / "verdicts.json")
    return {(v["nodeid"].split("[")[-1].rstrip("]"), v["kpi"]): v for v in verdicts}


def seed(project: Project, noisy: Noisy, count: int = 20, **labels: str) -> None:
    for size in (1, 2):
        path = project.seed_history({"throughput": noisy(100.0 * size, 0.02, count, seed=size),
                                     "latency": noisy(10.0, 0.02, count, seed=10 + size),
                                     "avg_tokens": noisy(512.0, 0.02, count, seed=20 + size)},
                                    size=size, labels=labels)
        project.import_history(path)


def test_step_change_in_one_kpi_is_a_regression_of_that_kpi_only(project: Project, noisy: Noisy,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    seed(project, noisy)
    project.set_values(throughput=70.0, avg_tokens=300.0)  # throughput -30 %; avg_tokens is ignored for regression
    result = project.run()
    assert result.ret == 1, "fail_on_regression is set in the suite config"
    verdicts = verdicts_of(project, "s1")
    for size in ("run-size=1", "run-size=2"):
        throughput = verdicts[(size, "throughput")]
        assert throughput["status"] == "regression"
        assert -32 < throughput["change_percent"] < -28 and throughput["pvalue"] < 0.001
        assert throughput["history_size"] == 20
        assert verdicts[(size, "latency")]["status"] == "accepted"
        assert verdicts[(size, "avg_tokens")]["status"] == "ignored"
    result.stdout.fnmatch_lines([
        "*topsail KPIs and regressions*",
        "labels: image=v1, ocp_version=4.16",
        "item*KPI*value*reference*change*p*history*verdict",
        "*run-size=1]*throughput*70.0 tokens/s*100.0*-3?.?%*e-*20*regression",
        "*run-size=2]*throughput*140.0 tokens/s*-2?.?%*e-*20*regression",
        "topsail report: *report.html",
        "topsail: 2 KPI regressions (fail_on_regression: the session fails) ?6 KPIs: 2 accepted, *2 ignored?",
        "*= 2 passed, 2 KPI regressed in *",
    ])
    summary = yaml.safe_load((project.artifacts("s1") / "regression_summary.yaml").read_text())
    assert summary["failures"] == summary["significant_performance_decrease"] == 2
    counts = summary["verdicts"]
    assert counts["accepted"] == 2 and counts["ignored"] == 2 and counts["no_history"] == 0
    assert summary["message"] == "2 KPI regressions" and len(summary["regressions"]) == 2
    assert summary["regressions"][0].startswith("demo throughput=70 tokens/s -3")


def test_direction_is_honoured_and_an_improvement_never_fails(project: Project, noisy: Noisy) -> None:
    seed(project, noisy)
    project.set_values(throughput=130.0, latency=7.0)  # both better: higher throughput, lower latency
    result = project.run()
    assert result.ret == 0
    verdicts = verdicts_of(project, "s1")
    assert verdicts[("run-size=1", "throughput")]["status"] == "improvement"
    assert verdicts[("run-size=1", "latency")]["status"] == "improvement"
    summary = yaml.safe_load((project.artifacts("s1") / "regression_summary.yaml").read_text())
    assert summary["failures"] == 0 and summary["significant_performance_increase"] == 4
    assert summary["message"] == "no regression; 4 improvements"
    result.stdout.fnmatch_lines(["topsail: no regression; 4 improvements ?*; -v lists the improvements?"])
    assert "topsail KPIs and regressions" not in result.stdout.str(), "no table: nothing went wrong"


def test_a_lower_better_kpi_going_up_is_a_regression(project: Project, noisy: Noisy) -> None:
    seed(project, noisy)
    project.set_values(latency=13.0, throughput=100.5)
    result = project.run()
    assert result.ret == 1
    verdicts = verdicts_of(project, "s1")
    assert verdicts[("run-size=1", "latency")]["status"] == "regression"
    assert verdicts[("run-size=1", "latency")]["change_percent"] > 25
    assert verdicts[("run-size=1", "throughput")]["status"] == "accepted"


def test_history_follows_labels_minus_comparison_and_ignored_keys(project: Project, noisy: Noisy) -> None:
    seed(project, noisy, image="v0", ocp_version="4.14")  # differs only in a comparison key and an ignored key
    project.set_values(throughput=70.0)
    project.run()
    assert verdicts_of(project, "s1")[("run-size=1", "throughput")]["history_size"] == 20

    project.set_labels(accelerator="h100")  # a new label: no record matches it
    result = project.run()
    assert result.ret == 0
    verdicts = verdicts_of(project, "s2")
    assert {v["status"] for key, v in verdicts.items() if key[1] != "avg_tokens"} == {"no_history"}


def test_sessions_build_the_history_and_a_failed_test_stores_nothing(project: Project) -> None:
    project.run()
    project.write("suites/demo/test_fail.py", "def test_broken(case, kpis):\n"
                  "    kpis.record('latency', 99)\n    assert False\n")
    project.run()
    verdicts = verdicts_of(project, "s2")
    assert verdicts[("run-size=1", "latency")]["history_size"] == 1
    assert verdicts[("run-size=1", "latency")]["status"] == "insufficient_history"
    project.run()
    # 2 passing items x 3 KPIs per session; the failed test's KPIs never reach the history
    from pytest_topsail.history.sqlite import SqliteHistory

    store = SqliteHistory(project.history)
    records = store.records("demo")
    store.close()
    assert len(records) == 3 * 3 * 2
    assert all("test_broken" not in r["nodeid"] for r in records)


def test_fewer_than_five_points_never_give_a_verdict(project: Project) -> None:
    for throughput in (100.0, 101.0, 99.0, 100.5):
        project.set_values(throughput=throughput)
        assert project.run().ret == 0
    project.set_values(throughput=80.0)
    assert project.run().ret == 0, "4 points: insufficient history, whatever the change"
    verdict = verdicts_of(project, "s5")[("run-size=1", "throughput")]
    assert verdict["status"] == "insufficient_history" and verdict["history_size"] == 4
    assert round(verdict["change_percent"], 1) == -20.1 and verdict["pvalue"] is None
    summary = yaml.safe_load((project.artifacts("s5") / "regression_summary.yaml").read_text())
    assert summary["verdicts"]["insufficient_history"] == 4 and summary["failures"] == 0


def test_five_identical_runs_give_no_regression_verdict(project: Project) -> None:
    for session in range(1, 7):
        assert project.run().ret == 0
        statuses = {v["status"] for v in verdicts_of(project, f"s{session}").values()}
        assert "regression" not in statuses and "improvement" not in statuses
    assert {v["status"] for v in verdicts_of(project, "s6").values()} == {"accepted", "ignored"}


def test_a_regression_stays_until_acknowledged_then_becomes_the_new_level(project: Project) -> None:
    from pytest_topsail.history.__main__ import main as history_cli

    seed_both(project)
    project.set_values(throughput=70.0)
    for session in ("s1", "s2", "s3"):  # the regressed values never become the baseline by themselves
        assert project.run().ret == 1
        throughput = verdicts_of(project, session)[("run-size=1", "throughput")]
        assert throughput["status"] == "regression" and throughput["history_size"] == 20
        assert throughput["reference"] == pytest.approx(100, abs=2)
    assert verdicts_of(project, "s3")[("run-size=1", "latency")]["history_size"] == 22, "accepted KPIs count"
    assert history_cli(["ack", "--history", str(project.history), "--suite", "demo", "--kpi", "through*",
                        "--reason", "smaller batch on purpose"]) == 0
    assert project.run().ret == 0
    throughput = verdicts_of(project, "s4")[("run-size=1", "throughput")]
    assert throughput["status"] == "accepted" and throughput["history_size"] == 23
    assert throughput["reference"] == pytest.approx(70, abs=0.01), "the acknowledged change is the new level"
    assert history_cli(["ack", "--history", str(project.history), "--suite", "demo", "--reason", "again"]) == 2


def test_an_ack_file_in_the_suite_acknowledges_one_run(project: Project) -> None:
    seed_both(project)
    project.set_values(throughput=70.0)
    assert project.run().ret == 1
    run_id = read_json(project.artifacts("s1") / "demo/001__test_train_run-size=1/kpis.json")[0]["run_id"]
    assert project.run().ret == 1
    project.write("suites/demo/acks.yaml", f"""
        - run: {run_id}
          kpis: [throughput]
          reason: new tokenizer, slower by design (PR 42)
        """)
    assert project.run().ret == 0
    throughput = verdicts_of(project, "s3")[("run-size=1", "throughput")]
    assert throughput["status"] == "accepted" and throughput["excluded"] == 1, "the second run is not acknowledged"
    project.write("suites/demo/acks.yaml", "- kpis: [throughput]\n  reason: no run named\n")
    result = project.run()
    assert result.ret == 1
    result.stdout.fnmatch_lines(["problem: *acks.yaml: entry 1: names no run and no test_uuid*"])


def test_replot_rebuilds_kpis_verdicts_and_report_without_running_tests(project: Project) -> None:
    project.run()
    saved = project.artifacts("s1")
    item = saved / "demo/001__test_train_run-size=1"
    results = read_json(item / "results.json")
    (item / "results.json").write_text(json.dumps({**results, "latency": 11.5}))
    (saved / "demo/002__test_train_run-size=2/results.json").unlink()  # parse fails: reported, saved KPIs kept
    (saved / "report.html").unlink()
    result = project.pytester.runpytest("suites", "-p", "no:cacheprovider", "--topsail-replot", str(saved))
    assert result.ret == 0
    output = result.stdout.str()
    assert "test_train" not in output.split("topsail KPIs and regressions")[0], "no test ran"
    result.stdout.fnmatch_lines(["problem: *002__test_train_run-size=2: parse failed (FileNotFoundError*"])
    kpis = {k["name"]: k["value"] for k in read_json(item / "kpis.json")}
    assert kpis["latency"] == 11.5
    assert (saved / "report.html").is_file()
    assert "latency{image=\"v1\",ocp_version=\"4.16\",size=\"1\"" in (saved / "kpis.prom").read_text()


def test_replot_of_a_missing_directory_or_with_xdist_is_a_usage_error(project: Project) -> None:
    result = project.pytester.runpytest("suites", "--topsail-replot", "nowhere")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--topsail-replot nowhere: not a directory*"])
    result = project.pytester.runpytest("suites", "--topsail-replot", ".", "-n", "2")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--topsail-replot runs no test: it cannot be combined with xdist*"])


def test_replot_of_artifacts_outside_the_project_in_two_words_works(project: Project) -> None:
    """`--topsail-replot DIR` written with a space works as with `=` (pytest no longer takes DIR for the rootdir)."""
    import shutil

    project.run()
    elsewhere = project.pytester.path.parent / f"{project.pytester.path.name}-saved"
    shutil.copytree(project.artifacts("s1"), elsewhere)
    for args in (["--topsail-replot", str(elsewhere)], [f"--topsail-replot={elsewhere}"]):
        (elsewhere / "report.html").unlink(missing_ok=True)
        result = project.pytester.runpytest(*args, "-p", "no:cacheprovider")
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        assert "problem:" not in result.stdout.str()
        assert (elsewhere / "report.html").is_file()


def test_replot_reads_bare_item_directories_and_reports_missing_files(project: Project) -> None:
    project.run()
    saved = project.artifacts("s1")
    bare = saved / "demo/002__test_train_run-size=2"
    for name in ("item.json", "kpis.json", "results.json"):
        (bare / name).unlink()
    broken = saved / "demo/003__broken"
    broken.mkdir()
    (broken / "settings.yaml").write_text("size: [unclosed\n")
    (broken / "exit_code").write_text("0\n")
    result = project.pytester.runpytest("--topsail-replot", str(saved), "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "problem: *002__test_train_run-size=2/kpis.json: missing",
        "problem: *003__broken: settings.yaml/exit_code unreadable (*Error)",
        "problem: *002__test_train_run-size=2: parse failed (FileNotFoundError*",
    ])
    verdicts = read_json(saved / "verdicts.json")
    assert {v["nodeid"].split("::")[-1] for v in verdicts} == {"test_train[run-size=1]"}


WORKER_KPIS = '''
from pytest_topsail.kpi import kpi


@kpi(unit="tokens/s", help="Training throughput", higher_better=True)
def throughput(data):
    return data["throughput"] * data["size"]


@kpi(unit="s", help="Model load time of the worker both items use", lower_better=True, scope="worker")
def load_s(data):
    return data["latency"]
'''

WORKER_TEST = """
import json
import pathlib


def test_train(case, kpis, request):
    values = json.loads((pathlib.Path(str(request.config.rootpath)) / "values.json").read_text())
    kpis.scope("worker", model="m1")
    kpis.record_from({**values, "size": case.settings["size"]})
"""


def test_a_worker_kpi_shared_by_items_is_judged_stored_and_shown_once(project: Project) -> None:
    project.write("suites/demo/kpis.py", WORKER_KPIS)
    project.write("suites/demo/test_demo.py", WORKER_TEST)
    for number in range(1, 7):
        project.set_values(latency=30.0 if number < 6 else 45.0)  # the 6th run's worker loads 50 % slower
        assert project.run().ret in (0, 1)
        loads = [v for v in read_json(project.artifacts(f"s{number}") / "verdicts.json") if v["kpi"] == "load_s"]
        assert len(loads) == 1, "one verdict per worker, not one per item"
        assert loads[0]["scope"] == "worker" and "size" not in loads[0]["labels"]
        assert loads[0]["labels"]["model"] == "m1"
    assert loads[0]["status"] == "regression" and loads[0]["history_size"] == 5, "judged against 5 runs, once each"
    from pytest_topsail.history import open_history

    stored = [r for r in open_history(str(project.history), {}).records("demo") if r["name"] == "load_s"]
    assert len(stored) == 6, "stored once per run"
    items = sorted((project.artifacts("s6") / "demo").glob("*/item.json"))
    shared = [read_json(path).get("shared_kpis") for path in items]
    assert sorted(len(s or []) for s in shared) == [0, 1], "the second item's copy is kept apart, not judged"
    assert "45" in "".join(json.dumps(s) for s in shared if s)


def test_a_worker_kpi_recorded_without_its_scope_labels_fails_naming_it(project: Project) -> None:
    project.write("suites/demo/kpis.py", WORKER_KPIS)
    project.write("suites/demo/test_demo.py", WORKER_TEST.replace('kpis.scope("worker", model="m1")', "pass"))
    result = project.run()
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*KPI 'load_s' is measured per worker*kpis.scope('worker', ...)*"])
