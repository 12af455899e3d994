"""Objects a test reports as left on the cluster: one loud section at the end with the command removing each, and a
failing exit status, also when the item ran on an xdist worker."""

from __future__ import annotations

import pytest

FILES = {
    "suites/s/config.yaml": "cases: [cases/s.yaml]\n",
    "cases/s.yaml": "- name: a\n- name: b\n",
    "suites/s/test_s.py": """
        import pytest_topsail as topsail

        def test_it(case):
            if case.name == "b":
                topsail.report_leftover("namespace s-b-0", "kubectl --kubeconfig /k delete namespace s-b-0")
    """,
}


@pytest.mark.parametrize("xdist", [False, True], ids=["single", "xdist"])
def test_leftovers_are_listed_at_the_end_and_fail_the_session(make_project, xdist: bool) -> None:
    pytester = make_project(FILES)
    if xdist:
        result = pytester.runpytest_subprocess("suites", "-n", "2", timeout=300)
    else:
        result = pytester.runpytest("suites")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= LEFT ON THE CLUSTER: 1 object(s) =*",
        "namespace s-b-0 (left by suites/s/test_s.py::test_it[[]b[]])",
        "    remove it with: kubectl --kubeconfig /k delete namespace s-b-0",
    ])


def test_a_run_leaving_nothing_says_nothing(make_project) -> None:
    pytester = make_project({**FILES, "suites/s/test_s.py": "def test_it(case):\n    pass\n"})
    result = pytester.runpytest("suites")
    assert result.ret == pytest.ExitCode.OK
    assert "LEFT ON THE CLUSTER" not in result.stdout.str()
