"""What one session over a suite writes: kpis.prom, kpis.json and lts.json per item, regression_summary.yaml,
junit properties, the terminal table; and what a run without a suite must not do."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest
import yaml

from tests.report.conftest import Project, read_json


def test_first_session_writes_every_output_with_no_history_verdicts(project: Project) -> None:
    result = project.run()
    result.assert_outcomes(passed=2)
    root = project.artifacts("s1")
    prom = (root / "kpis.prom").read_text()
    assert "# HELP throughput Training throughput\n# TYPE throughput gauge\n# UNIT throughput tokens/s\n" in prom
    assert re.search(r'^throughput\{image="v1",ocp_version="4.16",size="2",suite="demo",'
                     r'test_id="test_train\[run-size=2\]"\} 200.0$', prom, re.M)
    assert prom.endswith("# EOF\n")
    items = sorted(path.parent for path in (root / "demo").glob("*/kpis.json"))
    assert [path.name for path in items] == ["001__test_train_run-size=1", "002__test_train_run-size=2"]
    kpis = {entry["name"]: entry for entry in read_json(items[0] / "kpis.json")}
    assert kpis["throughput"]["value"] == 100.0 and kpis["throughput"]["higher_better"] is True
    assert kpis["latency"]["higher_better"] is False and kpis["avg_tokens"]["ignored_for_regression"] is True
    assert kpis["latency"]["labels"] == {"size": 1, "image": "v1", "ocp_version": "4.16"}
    lts = read_json(items[0] / "lts.json")
    assert set(lts) == {"metadata", "results", "kpis"}
    assert lts["metadata"]["settings"] == {"size": 1} and lts["metadata"]["exit_code"] == 0
    assert lts["metadata"]["test_uuid"] == (items[0] / ".uuid").read_text().strip() == kpis["latency"]["test_uuid"]
    assert lts["kpis"]["throughput"]["unit"] == "tokens/s"
    summary = yaml.safe_load((root / "regression_summary.yaml").read_text())
    assert summary["no_history"] == 4 and summary["not_analyzed"] == 2 and summary["failures"] == 0
    assert summary["kpis_count"] == 6 and summary["entries_count"] == 2 and summary["total_points"] == 6
    assert (root / "report.html").is_file()
    assert project.history.is_file()


def test_strict_lts_payload_validates_against_the_schema(project: Project) -> None:
    from pytest_topsail.lts import LtsPayload

    project.write("suites/demo/config.yaml", "cases: [cases/demo.yaml]\nlts: {strict: true}\n")
    project.write("suites/demo/test_demo.py", "def test_train(case, kpis):\n"
                  "    kpis.record('latency', 3, labels={'extra': [1, 2]})\n"
                  "    kpis.record('speed', 3, unit='x', help='h', higher_better=True)\n")
    result = project.run()
    assert result.ret == 0
    payload = read_json(project.artifacts("s1") / "demo/001__test_train_run-size=1/lts.json")
    validated = LtsPayload.model_validate(payload)
    assert validated.kpis["latency"].labels["extra"] == "[1, 2]"
    assert validated.metadata.config["lts"] == {"strict": True}


def test_junit_carries_kpi_values_and_verdicts_without_warnings(project: Project) -> None:
    # pytest-benchmark, when installed, warns under an outer xdist run: not ours, so blocked
    result = project.run("--junitxml=junit.xml", "-W", "error", "-p", "no:benchmark")
    assert result.ret == 0
    assert "warnings summary" not in result.stdout.str()
    assert "PytestWarning" not in result.stdout.str()
    tree = ElementTree.parse(project.path / "junit.xml")
    cases = {case.get("name"): case for case in tree.iter("testcase")}
    properties = {name: {p.get("name"): p.get("value") for p in case.iter("property")} for name, case in cases.items()}
    assert properties["test_train[run-size=2]"]["kpi.throughput"] == "200 tokens/s"
    assert properties["test_train[run-size=2]"]["verdict.throughput"] == "no_history history=0"
    assert properties["test_train[run-size=1]"]["verdict.avg_tokens"] == "ignored history=0"


def test_terminal_table_lists_each_kpi_verdict_and_the_output_paths(project: Project) -> None:
    result = project.run()
    result.stdout.fnmatch_lines([
        "*topsail KPIs and regressions*",
        "suite*item*KPI*value*change*history*verdict",
        "demo*test_train?run-size=1?*throughput*100.0 tokens/s*0*no_history",
        "*6 KPI(s): 0 regression(s), 0 improvement(s), 0 accepted, 4 without history, 2 ignored",
        f"topsail report: {project.artifacts('s1') / 'report.html'}",
    ])


def test_run_without_a_suite_gets_no_report_and_no_output(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    after_header = result.stdout.str().split("collected 1 item", 1)[1]
    assert "topsail" not in after_header
    assert not (pytester.path / "artifacts").exists()
    assert not (pytester.path / ".topsail").exists(), "no history file for a run without KPIs"
    assert not list(pytester.path.rglob("report.html"))


def test_kpis_fixture_outside_a_suite_fails_with_a_clear_message(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="def test_plain(kpis):\n    kpis.record('x', 1)\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kpis fixture: test_plain.py::test_plain is not an item of a topsail suite*"])
    assert "Traceback" not in result.stdout.str()


def test_undeclared_kpi_fails_the_test_naming_kpis_py(project: Project) -> None:
    project.write("suites/demo/test_demo.py", "def test_train(case, kpis):\n    kpis.record('speed', 3)\n")
    result = project.run()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*KPI 'speed' is not declared in *kpis.py*"])


def test_labels_not_matching_the_suite_model_fail_the_test(project: Project) -> None:
    project.set_labels(image=None)
    result = project.run()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*kpis.py: KPI labels do not match the suite's Labels model: key image: *"])


def test_pytest_html_gets_a_kpi_column_when_installed(project: Project) -> None:
    pytest.importorskip("pytest_html")
    result = project.run("--html=ph.html")
    assert result.ret == 0
    page = (project.path / "ph.html").read_text()
    assert "<th>KPIs</th>" in page
    assert "throughput=200 tokens/s" in page and "latency=10 ms" in page


def test_pytest_html_report_of_a_run_without_suite_has_no_kpi_column(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_html")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    assert pytester.runpytest("-p", "no:cacheprovider", "--html=ph.html").ret == 0
    assert "KPIs" not in (pytester.path / "ph.html").read_text()


def test_a_bad_regression_section_is_a_start_up_error_naming_the_key(project: Project) -> None:
    project.write("suites/demo/config.yaml", "cases: [cases/demo.yaml]\nregression: {windw_len: 3}\n")
    result = project.run()
    assert result.ret == 4, "found at configure time, before any test runs"
    result.stderr.fnmatch_lines(["ERROR: suites/demo/config.yaml: regression: unknown key 'windw_len'; known: *"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not project.artifacts("s1").exists()


def test_an_unusable_history_file_is_reported_not_a_traceback(project: Project) -> None:
    (project.path / "not-a-dir").write_text("")
    result = project.run("--topsail-history", "not-a-dir/history.sqlite")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["problem: KPI history *not-a-dir/history.sqlite: cannot be opened*"])
    assert "Traceback" not in result.stdout.str()
    assert (project.artifacts("s1") / "kpis.prom").is_file(), "the other outputs are still written"


def test_history_location_from_the_suite_config_is_relative_to_the_rootdir(
        project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.write("suites/demo/config.yaml", "cases: [cases/demo.yaml]\nhistory: {location: data/kpis.sqlite}\n")
    elsewhere = project.path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = project.pytester.runpytest(str(project.path / "suites"), "-p", "no:cacheprovider",
                                        "--artifacts", str(project.artifacts("s1")))
    assert result.ret == 0
    assert (project.path / "data/kpis.sqlite").is_file() and not project.history.exists()
    assert not (elsewhere / "data").exists()
    result.stdout.no_fnmatch_line("*problem*")
