"""What one session over a suite writes: kpis.prom, kpis.json and lts.json per item, regression_summary.yaml,
junit properties, the terminal table; and what a run without a suite must not do."""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import yaml

from tests.report.conftest import Project, read_json, seed_both


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
    assert summary["verdicts"]["no_history"] == 4 and summary["verdicts"]["ignored"] == 2 and summary["failures"] == 0
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
    assert validated.kpis["latency"].model_extra == {"extra": "[1, 2]", "size": 1, "image": "v1",
                                                     "ocp_version": "4.16"}  # labels at the entry's top
    assert validated.metadata.config["lts"] == {"strict": True}


SCHEMA = Path(__file__).parent / "data" / "junit-10.xsd"


def junit_properties(path: Path) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(testsuite properties, testcase name -> its properties)."""
    tree = ElementTree.parse(path)
    suite = tree.find("testsuite")
    assert suite is not None
    own = suite.find("properties")
    suite_properties = {p.get("name"): p.get("value") for p in own.iter("property")} if own is not None else {}
    cases = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
             for case in tree.iter("testcase")}
    return suite_properties, cases


def test_xunit2_junit_validates_against_pytests_schema_with_kpis_as_testsuite_properties(project: Project) -> None:
    import xmlschema

    seed_both(project)
    project.set_values(throughput=60.0)
    # pytest-benchmark, when installed, warns under an outer xdist run: not ours, so blocked
    result = project.run("--junitxml=junit.xml", "-o", "junit_family=xunit2", "-W", "error", "-p", "no:benchmark")
    assert result.ret == 1
    assert "warnings summary" not in result.stdout.str() and "PytestWarning" not in result.stdout.str()
    xmlschema.XMLSchema(SCHEMA).validate(project.path / "junit.xml")
    suite, cases = junit_properties(project.path / "junit.xml")
    assert all(not properties for properties in cases.values()), "xunit2 forbids testcase properties"
    item = "suites/demo/test_demo.py::test_train[run-size=2]::"
    assert suite[item + "kpi.throughput"] == "120" and suite[item + "kpi.throughput.unit"] == "tokens/s"
    assert suite[item + "verdict.throughput"] == "regression"
    assert -41 < float(suite[item + "verdict.throughput.change_percent"]) < -39
    assert suite[item + "verdict.throughput.history"] == "20"
    assert suite[item + "verdict.avg_tokens"] == "ignored"
    assert suite["topsail.verdict"] == "2 KPI regressions"
    assert suite["topsail.report"].endswith("report.html")
    lines = junit_system_out(project.path / "junit.xml")["test_train[run-size=2]"]
    assert [line.split(" | ")[0] for line in lines] == ["topsail KPI throughput = 120 tokens/s",
                                                        "topsail KPI latency = 10 ms",
                                                        "topsail KPI avg_tokens = 512 tokens"], lines
    assert re.fullmatch(r"topsail KPI throughput = 120 tokens/s \| verdict regression \| change -[34]\d\.\d% \| "
                        r"reference 19\d\.?\d* \| history 20", lines[0]), lines[0]
    assert " | verdict accepted | " in lines[1] and " | verdict ignored | " in lines[2]


def junit_system_out(path: Path) -> dict[str, list[str]]:
    """testcase name -> its topsail KPI lines (from its system-out elements)."""
    tree = ElementTree.parse(path)
    return {case.get("name"): [line for out in case.iter("system-out") for line in (out.text or "").splitlines()
                               if line.startswith("topsail KPI ")] for case in tree.iter("testcase")}


def test_every_kpi_of_an_item_is_in_its_testcase_under_each_junit_family(project: Project) -> None:
    import xmlschema

    seed_both(project)
    for family in ("xunit2", "xunit1", "legacy"):
        result = project.run(f"--junitxml=junit-{family}.xml", "-o", f"junit_family={family}", "-p", "no:benchmark")
        assert result.ret == 0, result.stdout.str()
        if family == "xunit2":
            xmlschema.XMLSchema(SCHEMA).validate(project.path / "junit-xunit2.xml")
        kpis = read_json(project.artifacts(f"s{project.sessions}") / "verdicts.json")
        outputs = junit_system_out(project.path / f"junit-{family}.xml")
        for verdict in kpis:
            name = verdict["nodeid"].split("::")[-1]
            assert [line for line in outputs[name] if line.startswith(f"topsail KPI {verdict['kpi']} = ")] == [
                line for line in outputs[name] if f" | verdict {verdict['status']} | " in line
                and line.startswith(f"topsail KPI {verdict['kpi']} = ")], (family, verdict["kpi"])
        assert {name: len(lines) for name, lines in outputs.items()} == {
            "test_train[run-size=1]": 3, "test_train[run-size=2]": 3}, family


def test_xunit1_junit_carries_numeric_kpis_per_testcase(project: Project) -> None:
    result = project.run("--junitxml=junit.xml", "-o", "junit_family=xunit1", "-W", "error", "-p", "no:benchmark")
    assert result.ret == 0
    suite, cases = junit_properties(project.path / "junit.xml")
    properties = cases["test_train[run-size=2]"]
    assert properties["kpi.throughput"] == "200" and properties["kpi.throughput.unit"] == "tokens/s"
    assert properties["verdict.throughput"] == "no_history" and properties["verdict.throughput.history"] == "0"
    assert cases["test_train[run-size=1]"]["verdict.avg_tokens"] == "ignored"


def test_terminal_says_one_verdict_line_and_no_table_when_nothing_changed(project: Project,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = project.run()
    result.stdout.fnmatch_lines([
        f"topsail report: {project.artifacts('s1') / 'report.html'}",
        "topsail: no verdict: not enough comparable history yet (0 of 5 comparable runs) "
        "?6 KPIs: 0 accepted, 0 insufficient_history, 4 no_history, 2 ignored?",
        "*= 2 passed in *",
    ])
    assert "topsail KPIs and regressions" not in result.stdout.str(), "no empty table on a first run"
    result = project.run("-vv")
    result.stdout.fnmatch_lines(["*topsail KPIs and regressions*", "item*KPI*value*verdict",
                                 "*run-size=1?*throughput*100.0 tokens/s*100.0*+0.0%*insufficient_history"])


def test_terminal_table_follows_the_terminal_width(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_both(project)
    project.set_values(throughput=60.0)
    monkeypatch.setenv("COLUMNS", "70")
    result = project.run()
    table = result.stdout.str().split("topsail KPIs and regressions", 1)[1].split("topsail KPIs:", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.strip()]
    assert rows and all(len(line) <= 70 for line in rows), rows
    assert all(line.split()[0].startswith("…") and line.split()[0].endswith("]") for line in rows[1:])
    assert rows[0].split() == ["item", "KPI", "value", "change", "verdict"], "p, history, reference dropped"


def test_teamcity_messages_carry_kpis_as_test_metadata(project: Project) -> None:
    pytest.importorskip("teamcity")
    result = project.run("--teamcity", "-p", "no:benchmark")
    assert result.ret == 0
    metadata = [line for line in result.stdout.lines if line.startswith("##teamcity[testMetadata")]
    assert any("name='throughput (tokens/s)'" in line and "type='number'" in line and "value='200'" in line
               and "testName='suites.demo.test_demo.test_train(run-size=2)'" in line for line in metadata), metadata
    assert len([line for line in metadata if "type='number'" in line]) == 6


def test_kpi_table_is_not_cut_at_80_columns_when_the_output_is_no_terminal(project: Project,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """PyCharm's --teamcity console and CI logs are no terminal: their width is not 80 columns."""
    pytest.importorskip("teamcity")
    monkeypatch.delenv("COLUMNS", raising=False)
    seed_both(project)
    project.set_values(throughput=60.0)
    result = project.run("--teamcity", "-p", "no:benchmark")
    table = result.stdout.str().split("topsail KPIs and regressions", 1)[1].split("topsail KPIs:", 1)[0]
    rows = [line for line in table.splitlines()[2:] if "throughput" in line]
    assert rows and all("suites/demo/test_demo.py" not in row and "…" not in row for row in rows), rows
    assert max(len(row) for row in rows) > 80 and all(row.split()[0].startswith("test_train[") for row in rows)


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


def test_pytest_html_gets_kpi_and_verdict_columns_and_links(project: Project) -> None:
    pytest.importorskip("pytest_html")
    seed_both(project)
    project.set_values(throughput=60.0)
    result = project.run("--html=out/ph.html")
    assert result.ret == 1
    page = html.unescape((project.path / "out/ph.html").read_text())  # pytest-html keeps its rows as JSON
    for column in ("KPIs", "KPI verdict", "topsail"):
        assert f">{column}</th>" in page
    assert "throughput=120.0 tokens/s<br>latency=10.0 ms" in page
    assert "1 regression (throughput)" in page
    assert page.count('href=\\"../artifacts/s1/report.html\\">report</a>') == 2, "a link per row"
    assert 'href=\\"../artifacts/s1/demo/001__test_train_run-size%3D1\\">artifacts</a>' in page
    assert 'topsail: 2 KPI regressions — <a href="../artifacts/s1/report.html">KPI report</a>' in page


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
    result.stderr.fnmatch_lines(["ERROR: suites/demo/config.yaml: invalid regression settings: "
                                 "key regression.windw_len: unknown key; known: *"])
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
