"""Each bad input of the issue's list: one clear message naming the file/key, a non-zero exit, no traceback."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFIG = """
cases: [cases/s/default.yaml]
cluster:
  nodes: 10
tests:
  s:
    namespace: ns
ci_presets:
  smoke:
    cluster.nodes: 1
"""

DEFAULT_CASES = """
- name: training
  jobs: [1, 2]
"""

TEST_MODULE = """
def test_it(case, topsail_suite):
    topsail_suite.command_args("scale run")
"""

TEMPLATE = """
scale run:
  namespace: {{ tests.s.namespace }}
"""


def project(make_project, **overrides: str) -> pytest.Pytester:
    files = {"suites/s/config.yaml": CONFIG, "suites/s/test_s.py": TEST_MODULE,
             "suites/s/command_args.yaml.j2": TEMPLATE, "cases/s/default.yaml": DEFAULT_CASES}
    files.update({path.replace("__", "/"): text for path, text in overrides.items()})
    return make_project(files)


# (id, files to replace: path with "/" written "__", extra command-line args, fragments the one message must hold)
BAD_INPUTS = [
    ("malformed-config-yaml", {"suites__s__config.yaml": "cases: [a\nb: 1\n"}, [],
     ["suites/s/config.yaml: malformed YAML: line 2"]),
    ("malformed-case-yaml", {"cases__s__default.yaml": "- name: x\n  jobs: [1\n"}, [],
     ["cases/s/default.yaml: malformed YAML: line 3"]),
    ("unknown-preset", {}, ["--preset", "bigg"],
     ["--preset 'bigg' is defined by no collected suite", "s: smoke"]),
    ("preset-cycle", {"suites__s__config.yaml": CONFIG + "  a:\n    extends: [b]\n  b:\n    extends: [a]\n"},
     ["--preset", "a"], ["suites/s/config.yaml: preset cycle: a -> b -> a"]),
    ("preset-creates-key", {"suites__s__config.yaml": CONFIG + "  bad:\n    cluster.gpus: 8\n"}, ["--preset", "bad"],
     ["suites/s/config.yaml: preset 'bad' sets 'cluster.gpus', which is not in the base configuration"]),
    ("unknown-var-key", {}, ["--var", "cluster.node=3"],
     ["--var 'cluster.node': unknown configuration key in suites/s/config.yaml", "cluster.nodes"]),
    ("malformed-var-no-equals", {}, ["--var", "cluster.nodes"], ["--var 'cluster.nodes': expected KEY=VALUE"]),
    ("malformed-var-yaml", {}, ["--var", "cluster.nodes=[1, 2"],
     ["--var 'cluster.nodes=[1, 2': VALUE is not valid YAML"]),
    ("undefined-template-variable", {"suites__s__command_args.yaml.j2": "scale run:\n  ns: {{ tests.s.nope }}\n"}, [],
     ["suites/s/command_args.yaml.j2:2: undefined variable", "nope"]),
    ("missing-case-file", {"suites__s__config.yaml": CONFIG.replace("default.yaml", "missing.yaml")}, [],
     ["suites/s/config.yaml: cases: case file 'cases/s/missing.yaml' not found"]),
    ("glob-matching-nothing", {"suites__s__config.yaml": CONFIG.replace("default.yaml", "*.yml")}, [],
     ["suites/s/config.yaml: cases: case glob 'cases/s/*.yml' matches no file"]),
    ("case-file-not-a-list", {"cases__s__default.yaml": "name: x\n"}, [],
     ["cases/s/default.yaml: a case file must be a YAML list of mappings"]),
    ("case-without-name", {"cases__s__default.yaml": "- jobs: 1\n"}, [],
     ["cases/s/default.yaml[0]: case without a 'name'"]),
    ("duplicate-case-ids", {"cases__s__default.yaml": "- name: a\n- name: b\n- name: a\n"}, [],
     ["duplicate case id 'a': cases/s/default.yaml[0] and cases/s/default.yaml[2]"]),
    ("unknown-skip-if-key", {"cases__s__default.yaml": "- name: a\n  jobs: [1, 2]\n  skip_if: {job: 1}\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): skip_if uses unknown key 'job'"]),
]


@pytest.mark.parametrize(("files", "args", "fragments"), [case[1:] for case in BAD_INPUTS],
                         ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_is_one_clear_message(make_project, files: dict[str, str], args: list[str],
                                        fragments: list[str]) -> None:
    pytester = project(make_project, **files)
    result = pytester.runpytest("suites", *args)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    error_lines = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(error_lines) == 1, output
    for fragment in fragments:
        assert fragment in error_lines[0], output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert not (pytester.path / "artifacts").exists()


SHOW_CONFIG_INPUTS = [case for case in BAD_INPUTS if case[0] in ("unknown-preset", "duplicate-case-ids",
                                                                   "undefined-template-variable")]


@pytest.mark.parametrize(("files", "args", "fragments"), [case[1:] for case in SHOW_CONFIG_INPUTS],
                         ids=[case[0] for case in SHOW_CONFIG_INPUTS])
def test_bad_input_is_reported_by_show_config(make_project, files: dict[str, str],
                                                                          args: list[str],
                                                                          fragments: list[str]) -> None:
    pytester = project(make_project, **files)
    result = pytester.runpytest("suites", "--topsail-show-config", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert fragments[0] in result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_template_error_at_run_time_fails_the_test_without_traceback(make_project) -> None:
    """A template that only fails with a value set at run time: the item fails with the message, no traceback."""
    pytester = project(make_project, **{
        "suites__s__test_s.py": """
            def test_it(case, topsail_suite, topsail_config):
                topsail_config.set("tests.s.namespace", "")
                topsail_suite.command_args("scale run")
        """,
        "suites__s__command_args.yaml.j2": "scale run:\n  ns: {{ tests.s.namespace or raise_exception('empty') }}\n",
    })
    result = pytester.runpytest("suites")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*TopsailError: *suites/s/command_args.yaml.j2:2: empty*"])
    assert "Traceback" not in result.stdout.str()


def test_unusable_artifacts_root_is_one_clear_message(make_project) -> None:
    pytester = project(make_project)
    (pytester.path / "taken").write_text("a file, not a directory")
    result = pytester.runpytest("suites", "--artifacts", "taken/run")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: artifacts root (--artifacts, else $ARTIFACT_DIR) */taken/run: */taken exists "
                                 "and is not a directory"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_unregistered_case_mark_with_strict_markers_names_the_case(make_project) -> None:
    pytester = project(make_project, **{
        "cases__s__default.yaml": "- name: a\n  marks: [slow]\n"})
    for run in (pytester.runpytest, lambda *args: pytester.runpytest_subprocess(*args, "-n", "2", timeout=120)):
        result = run("suites", "--strict-markers")  # a collection error of the module, also on xdist workers
        assert result.ret not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        result.stdout.fnmatch_lines(["*ERROR collecting suites/s/test_s.py*",
                                     "cases/s/default.yaml[[]0] (case 'a'): marks: 'slow' not found in `markers`*"])
        assert "During handling" not in result.stdout.str()
        assert "Traceback" not in result.stdout.str() + result.stderr.str()
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result = pytester.runpytest("suites", "-o", "markers=slow: long cases", "--strict-markers", "-m", "slow")
    result.assert_outcomes(passed=1)


def test_or_env_variable_may_be_exported_after_start_up(make_project, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up checks the template, but an or_env variable can still come from a fixture: checked when used."""
    monkeypatch.delenv("SCALE_IMAGE", raising=False)
    pytester = project(make_project, **{
        "suites__s__command_args.yaml.j2": "scale run:\n  image: {{ '' | or_env('SCALE_IMAGE') }}\n",
        "suites__s__test_s.py": """
            import os

            def test_it(case, topsail_suite):
                os.environ["SCALE_IMAGE"] = "quay.io/x:1"
                try:
                    assert topsail_suite.command_args("scale run") == {"image": "quay.io/x:1"}
                finally:
                    del os.environ["SCALE_IMAGE"]

            def test_unset(topsail_suite):
                topsail_suite.command_args("scale run")
        """,
    })
    result = pytester.runpytest("suites")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*TopsailError: suites/s/command_args.yaml.j2:2: value is empty and environment "
                                 "variable SCALE_IMAGE is not set*"])
