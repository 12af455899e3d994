"""Garbled saved artifacts, unwritable outputs and a broken history: one message each, never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.report.conftest import Project


def assert_no_traceback(result: pytest.RunResult) -> str:
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    return output


def saved_run(project: Project):
    assert project.run().ret == 0
    saved = project.artifacts("s1")
    return saved, saved / "demo/001__test_train_run-size=1", saved / "demo/002__test_train_run-size=2"


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("item.json", b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "*001__test_train_run-size=1/item.json: unreadable*"),
    ("item.json", b"[1, 2, 3]", "*001__test_train_run-size=1/item.json: not an item record*"),
    ("item.json", b'{"suite": "demo", "nodeid": "x", "kpis": "many"}',
     "*001__test_train_run-size=1/item.json: not an item record*"),
    ("kpis.json", b"\xff\xfe\x00garbage", "*001__test_train_run-size=1/kpis.json: unreadable*"),
    ("settings.yaml", b"\xff\xfe: [", "*001__test_train_run-size=1: settings.yaml/exit_code unreadable*"),
    ("exit_code", b"\xff\xfe", "*001__test_train_run-size=1: settings.yaml/exit_code unreadable*"),
])
def test_replot_of_a_garbled_file_is_one_problem_line(project: Project, name: str, content: bytes,
                                                       problem: str) -> None:
    saved, first, _ = saved_run(project)
    if name != "item.json":
        (first / "item.json").unlink()  # the bare layout: settings.yaml + exit_code (+ kpis.json)
    (first / name).write_bytes(content)
    result = project.pytester.runpytest("suites", "-p", "no:cacheprovider", f"--topsail-replot={saved}")
    assert_no_traceback(result)
    result.stdout.fnmatch_lines([f"problem: {problem}"])
    assert result.ret == 0
    verdicts = json.loads((saved / "verdicts.json").read_text())
    assert any("size=2" in verdict["nodeid"] for verdict in verdicts), "the other item is still replotted"


def test_replot_output_that_cannot_be_written_is_one_error(project: Project) -> None:
    saved, _, _ = saved_run(project)
    (saved / "kpis.prom").unlink()
    (saved / "kpis.prom").mkdir()  # writing the file now fails (IsADirectoryError)
    result = project.pytester.runpytest("suites", "-p", "no:cacheprovider", f"--topsail-replot={saved}")
    output = assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert output.count(f"{saved / 'kpis.prom'}: cannot be written") == 1, output
    assert (saved / "report.html").is_file(), "the other outputs are still written"


def test_report_path_that_cannot_be_written_is_one_error(project: Project) -> None:
    result = project.run("--topsail-report", "/proc/topsail/report.html")
    output = assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert output.count("report /proc/topsail/report.html: cannot be written") == 1, output


@pytest.mark.parametrize(("history", "message"), [
    ("garbled.sqlite", "KPI history *garbled.sqlite: cannot be opened: file is not a database"),
    ("/proc/topsail/history.sqlite", "KPI history /proc/topsail/history.sqlite: cannot be opened*"),
])
def test_history_that_cannot_be_used_is_one_error(project: Project, history: str, message: str) -> None:
    (project.path / "garbled.sqlite").write_bytes(b"\x00\xffnot sqlite at all" * 100)
    result = project.run("--topsail-history", history)
    assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert (project.artifacts("s1") / "report.html").is_file()


@pytest.mark.parametrize(("name", "problem"), [
    ("config.yaml", "*demo/config.yaml: unreadable saved configuration*"),
    ("verdicts.json", "*verdicts.json: unreadable*"),
])
def test_replot_of_a_garbled_run_file_is_a_problem(project: Project, name: str, problem: str) -> None:
    saved, _, _ = saved_run(project)
    (saved / "demo" / "config.yaml").is_file() or (saved / "demo" / "config.yaml").write_text("{}")
    garbled = saved / "demo" / name if name == "config.yaml" else saved / name
    garbled.write_bytes(b"\xff\xfe: [")
    result = project.pytester.runpytest("suites", "-p", "no:cacheprovider", f"--topsail-replot={saved}")
    assert_no_traceback(result)
    result.stdout.fnmatch_lines([f"problem: {problem}"])
    assert result.ret == 0, "the items themselves were replotted"


def test_replot_where_nothing_can_be_replotted_fails(project: Project) -> None:
    saved, first, second = saved_run(project)
    for item in (first, second):
        for name in ("item.json", "settings.yaml"):
            (item / name).write_bytes(b"\xff\xfe")
    result = project.pytester.runpytest("suites", "-p", "no:cacheprovider", f"--topsail-replot={saved}")
    output = assert_no_traceback(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert output.count("nothing could be replotted") == 1, output
