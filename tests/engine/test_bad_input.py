"""Each bad input of the issue's list: one clear message naming the file/key, a non-zero exit, no traceback."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFIG = """
cases: [cases/s/default.yaml]
sizing:
  nodes: 10
tests:
  s:
    namespace: ns
ci_presets:
  smoke:
    sizing.nodes: 1
"""

DEFAULT_CASES = """
- name: training
  jobs: [1, 2]
"""

TEST_MODULE = """
def test_it(case, topsail_suite):
    pass
"""


def project(make_project, **overrides: str | bytes) -> pytest.Pytester:
    """The project above with files replaced (text, or bytes written as they are)."""
    files = {"suites/s/config.yaml": CONFIG, "suites/s/test_s.py": TEST_MODULE,
             "cases/s/default.yaml": DEFAULT_CASES}
    files.update({path.replace("__", "/"): text for path, text in overrides.items() if isinstance(text, str)})
    pytester = make_project(files)
    for path, data in overrides.items():
        if isinstance(data, bytes):
            (pytester.path / path.replace("__", "/")).write_bytes(data)
    return pytester


# (id, files to replace: path with "/" written "__", extra command-line args, fragments the one message must hold)
BAD_REGRESSION = "suites/s/config.yaml: invalid regression settings: key regression."  # the one formatter
BAD_INPUTS = [
    ("malformed-config-yaml", {"suites__s__config.yaml": "cases: [a\nb: 1\n"}, [],
     ["suites/s/config.yaml: malformed YAML: line 2"]),
    ("malformed-case-yaml", {"cases__s__default.yaml": "- name: x\n  jobs: [1\n"}, [],
     ["cases/s/default.yaml: malformed YAML: line 3"]),
    ("unknown-preset", {}, ["--preset", "bigg"],
     ["--preset 'bigg' is defined by no collected suite", "s: smoke"]),
    ("preset-cycle", {"suites__s__config.yaml": CONFIG + "  a:\n    extends: [b]\n  b:\n    extends: [a]\n"},
     ["--preset", "a"], ["suites/s/config.yaml: preset cycle: a -> b -> a"]),
    ("preset-creates-key", {"suites__s__config.yaml": CONFIG + "  bad:\n    sizing.gpus: 8\n"}, ["--preset", "bad"],
     ["suites/s/config.yaml: preset 'bad' sets 'sizing.gpus', which is not in the base configuration"]),
    ("unknown-var-key", {}, ["--var", "sizing.node=3"],
     ["--var 'sizing.node': unknown configuration key in suites/s/config.yaml", "sizing.nodes"]),
    ("malformed-var-no-equals", {}, ["--var", "sizing.nodes"], ["--var 'sizing.nodes': expected KEY=VALUE"]),
    ("malformed-var-yaml", {}, ["--var", "sizing.nodes=[1, 2"],
     ["--var 'sizing.nodes=[1, 2': VALUE is not valid YAML"]),
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
    # --- duplicate keys: PyYAML keeps the last one silently (a second 'tests:' wiped the thresholds)
    ("duplicate-top-level-key", {"suites__s__config.yaml": CONFIG + "tests:\n  other: 1\n"}, [],
     ["suites/s/config.yaml: malformed YAML: line 10, column 1: duplicate key 'tests' (first given at line 4)"]),
    ("duplicate-nested-key", {"suites__s__config.yaml": CONFIG.replace("  nodes: 10\n", "  nodes: 10\n  nodes: 3\n")},
     [], ["suites/s/config.yaml: malformed YAML: line 4, column 3: duplicate key 'nodes' (first given at line 3)"]),
    ("duplicate-key-in-preset", {"suites__s__config.yaml": CONFIG + "    sizing.nodes: 2\n"}, [],
     ["suites/s/config.yaml: malformed YAML: line 10", "duplicate key 'sizing.nodes' (first given at line 9)"]),
    ("duplicate-preset-name", {"suites__s__config.yaml": CONFIG + "  smoke:\n    sizing.nodes: 2\n"}, [],
     ["suites/s/config.yaml: malformed YAML: line 10", "duplicate key 'smoke' (first given at line 8)"]),
    ("duplicate-key-in-case", {"cases__s__default.yaml": "- name: a\n  jobs: 1\n  jobs: 2\n"}, [],
     ["cases/s/default.yaml: malformed YAML: line 3, column 3: duplicate key 'jobs' (first given at line 2)"]),
    ("duplicate-key-in-flow-case", {"cases__s__default.yaml": "- {name: a, name: b}\n"}, [],
     ["cases/s/default.yaml: malformed YAML: line 1", "duplicate key 'name'"]),
    ("duplicate-key-beside-merge-key", {"cases__s__default.yaml": "- &base {name: a, jobs: 1}\n"
                                                                  "- <<: *base\n  name: b\n  name: c\n"}, [],
     ["cases/s/default.yaml: malformed YAML: line 4", "duplicate key 'name' (first given at line 3)"]),
    ("duplicate-key-in-var-value", {}, ["--var", "tests.s.namespace={a: 1, a: 2}"],
     ["--var 'tests.s.namespace={a: 1, a: 2}': VALUE is not valid YAML", "duplicate key 'a'"]),
    # --- the configuration document
    ("empty-config-yaml", {"suites__s__config.yaml": ""}, [], ["suites/s/config.yaml: the configuration is empty"]),
    ("comment-only-config-yaml", {"suites__s__config.yaml": "# nothing yet\n"}, [],
     ["suites/s/config.yaml: the configuration is empty"]),
    ("config-yaml-a-list", {"suites__s__config.yaml": "- cases\n"}, [],
     ["suites/s/config.yaml: the configuration must be a YAML mapping, got list"]),
    ("config-yaml-not-utf8", {"suites__s__config.yaml": b"cases: [caf\xc3]\n"}, [],
     ["suites/s/config.yaml: not UTF-8 text"]),
    ("config-yaml-tab-indent", {"suites__s__config.yaml": "tests:\n\tnamespace: x\n"}, [],
     ["suites/s/config.yaml: malformed YAML: line 2"]),
    ("cases-an-integer", {"suites__s__config.yaml": CONFIG.replace("cases: [cases/s/default.yaml]", "cases: 5")}, [],
     ["suites/s/config.yaml: cases: expected a case file path or glob, or a non-empty list of them, got 5"]),
    ("cases-an-empty-list", {"suites__s__config.yaml": CONFIG.replace("[cases/s/default.yaml]", "[]")}, [],
     ["suites/s/config.yaml: cases: expected a case file path or glob", "got []"]),
    ("cases-a-mapping", {"suites__s__config.yaml": CONFIG.replace("[cases/s/default.yaml]", "{a: b}")}, [],
     ["suites/s/config.yaml: cases: expected a case file path or glob", "got {'a': 'b'}"]),
    ("cases-list-of-numbers", {"suites__s__config.yaml": CONFIG.replace("[cases/s/default.yaml]", "[1, 2]")}, [],
     ["suites/s/config.yaml: cases: expected a case file path or glob", "got [1, 2]"]),
    ("cases-from-var-integer", {}, ["--var", "cases=5"], ["suites/s/config.yaml: cases: expected a case file path"]),
    ("unknown-reference", {"suites__s__config.yaml": CONFIG + "  copy:\n    tests.s.namespace: '@tests.s.nope'\n"},
     ["--preset", "copy"], ["suites/s/config.yaml: 'tests.s.namespace' refers to unknown key 'tests.s.nope'"]),
    ("reference-cycle", {"suites__s__config.yaml": CONFIG.replace("    namespace: ns\n",
                                                                   "    namespace: '@tests.s.other'\n"
                                                                   "    other: '@tests.s.namespace'\n")}, [],
     ["suites/s/config.yaml: reference cycle:", "tests.s.namespace"]),
    ("self-reference", {"suites__s__config.yaml": CONFIG.replace("    namespace: ns\n", "    namespace: ns\n"
                                                                  "    me: '@tests.s.me'\n")}, [],
     ["suites/s/config.yaml: reference cycle:", "tests.s.me"]),
    ("reference-from-var", {}, ["--var", "tests.s.namespace=@sizing.nope"],
     ["suites/s/config.yaml: 'tests.s.namespace' refers to unknown key 'sizing.nope'"]),
    ("invalid-dotted-key-in-var", {}, ["--var", "tests..s=1"], ["invalid configuration key 'tests..s'"]),
    ("var-without-key", {}, ["--var", "=3"], ["--var '=3': expected KEY=VALUE"]),
    # --- presets
    ("empty-preset-option", {}, ["--preset", ""], ["--preset '': empty preset name"]),
    ("empty-name-in-preset-list", {}, ["--preset", "smoke,"], ["--preset 'smoke,': empty preset name"]),
    ("empty-preset-body", {"suites__s__config.yaml": CONFIG + "  empty:\n"}, ["--preset", "empty"],
     ["suites/s/config.yaml: preset 'empty' is empty (it sets no key and extends no preset)"]),
    ("empty-preset-mapping", {"suites__s__config.yaml": CONFIG + "  empty: {}\n"}, ["--preset", "empty"],
     ["suites/s/config.yaml: preset 'empty' is empty"]),
    ("preset-not-a-mapping", {"suites__s__config.yaml": CONFIG + "  five: 5\n"}, ["--preset", "five"],
     ["suites/s/config.yaml: preset 'five' must be a mapping of keys to values, got int"]),
    ("presets-not-a-mapping", {"suites__s__config.yaml": CONFIG.split("ci_presets:")[0] + "ci_presets: [smoke]\n"},
     [], ["suites/s/config.yaml: ci_presets must be a mapping of preset names to presets"]),
    ("extends-unknown-preset", {"suites__s__config.yaml": CONFIG + "  big:\n    extends: [huge]\n"},
     ["--preset", "big"], ["suites/s/config.yaml: unknown preset 'huge' (extended by preset 'big')"]),
    ("extends-not-a-name", {"suites__s__config.yaml": CONFIG + "  big:\n    extends: 5\n"}, ["--preset", "big"],
     ["suites/s/config.yaml: preset 'big': extends must be a preset name or a list of names, got 5"]),
    ("to-apply-unknown-preset", {"suites__s__config.yaml": CONFIG + "  to_apply: [smok]\n"}, [],
     ["suites/s/config.yaml: unknown preset 'smok'; presets defined: smoke"]),
    ("preset-key-not-a-string", {"suites__s__config.yaml": CONFIG + "  num:\n    1: x\n"}, ["--preset", "num"],
     ["suites/s/config.yaml: preset 'num': key 1 must be a string"]),
    # --- case files
    ("empty-case-file", {"cases__s__default.yaml": ""}, [],
     ["cases/s/default.yaml: the case file holds no case"]),
    ("comment-only-case-file", {"cases__s__default.yaml": "# TODO\n"}, [],
     ["cases/s/default.yaml: the case file holds no case"]),
    ("empty-list-case-file", {"cases__s__default.yaml": "[]\n"}, [],
     ["cases/s/default.yaml: the case file holds no case"]),
    ("case-file-not-utf8", {"cases__s__default.yaml": b"- name: caf\xc3\n"}, [],
     ["cases/s/default.yaml: not UTF-8 text"]),
    ("case-not-a-mapping", {"cases__s__default.yaml": "- 5\n"}, [],
     ["cases/s/default.yaml[0]: a case must be a mapping with a 'name', got int"]),
    ("case-with-empty-name", {"cases__s__default.yaml": "- name: ''\n"}, [],
     ["cases/s/default.yaml[0]: case without a 'name'"]),
    ("unknown-raw-lists-entry", {"cases__s__default.yaml": "- name: a\n  ports: [1, 2]\n  raw_lists: [port]\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): raw_lists names 'port', which is not a setting of the case",
      "settings are: ports"]),
    ("raw-lists-not-a-list", {"cases__s__default.yaml": "- name: a\n  raw_lists: 5\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): raw_lists must be a list of strings, got 5"]),
    ("marks-not-strings", {"cases__s__default.yaml": "- name: a\n  marks: [1]\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): marks must be a list of strings, got [1]"]),
    ("xdist-group-not-a-string", {"cases__s__default.yaml": "- name: a\n  xdist_group: [x]\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): xdist_group must be a string"]),
    ("extra-settings-not-mappings", {"cases__s__default.yaml": "- name: a\n  extra_settings: [1]\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): extra_settings must be a list of mappings"]),
    ("skip-if-not-a-mapping", {"cases__s__default.yaml": "- name: a\n  jobs: [1, 2]\n  skip_if: [5]\n"}, [],
     ["cases/s/default.yaml[0] (case 'a'): skip_if must be a mapping or a list of mappings"]),
    ("duplicate-ids-from-matrix", {"cases__s__default.yaml": "- name: a\n- name: a\n  jobs: 2\n"}, [],
     ["duplicate case id 'a'"]),
    # --- regression settings: typed, checked at start-up (not after the run)
    ("comparison-keys-a-string", {"suites__s__config.yaml": CONFIG + "regression: {comparison_keys: workload}\n"}, [],
     [BAD_REGRESSION + "comparison_keys: Input should be a valid list (got 'workload')"]),
    ("comparison-keys-from-var", {"suites__s__config.yaml": CONFIG + "regression: {comparison_keys: [jobs]}\n"},
     ["--var", "regression.comparison_keys=workload"],
     [BAD_REGRESSION + "comparison_keys: Input should be a valid list (got 'workload')"]),
    ("fail-on-regression-sometimes", {"suites__s__config.yaml": CONFIG + "regression: {fail_on_regression: "
                                                                         "sometimes}\n"}, [],
     [BAD_REGRESSION + "fail_on_regression: Input should be a valid boolean (got 'sometimes')"]),
    ("fail-on-regression-quoted-false", {"suites__s__config.yaml": CONFIG + "regression: {fail_on_regression: "
                                                                            "'false'}\n"}, [],
     [BAD_REGRESSION + "fail_on_regression: Input should be a valid boolean (got 'false')"]),
    ("max-pvalue-not-a-number", {"suites__s__config.yaml": CONFIG + "regression: {max_pvalue: low}\n"}, [],
     [BAD_REGRESSION + "max_pvalue: Input should be a valid number (got 'low')"]),
    ("max-pvalue-out-of-range", {"suites__s__config.yaml": CONFIG + "regression: {max_pvalue: 5}\n"}, [],
     [BAD_REGRESSION + "max_pvalue: Input should be less than or equal to 1 (got 5)"]),
    ("window-len-too-small", {"suites__s__config.yaml": CONFIG + "regression: {window_len: 1}\n"}, [],
     [BAD_REGRESSION + "window_len: Input should be greater than or equal to 2 (got 1)"]),
    ("min-history-a-string", {"suites__s__config.yaml": CONFIG + "regression: {min_history: '5'}\n"}, [],
     [BAD_REGRESSION + "min_history: Input should be a valid integer (got '5')"]),
    ("unknown-regression-engine", {"suites__s__config.yaml": CONFIG + "regression: {engine: magic}\n"}, [],
     [BAD_REGRESSION + "engine: Input should be 'auto', 'builtin' or 'otava' (got 'magic')"]),
    ("unknown-regression-key", {"suites__s__config.yaml": CONFIG + "regression: {max_p: 0.1}\n"}, [],
     [BAD_REGRESSION + "max_p: unknown key; known: ack_file, comparison_keys"]),
    ("regression-not-a-mapping", {"suites__s__config.yaml": CONFIG + "regression: [a]\n"}, [],
     ["suites/s/config.yaml: regression: must be a mapping, not list"]),
    ("lts-strict-a-string", {"suites__s__config.yaml": CONFIG + "lts: {strict: 'yes'}\n"}, [],
     ["suites/s/config.yaml: lts.strict must be true or false, got 'yes'"]),
    ("history-location-a-number", {"suites__s__config.yaml": CONFIG + "history: {location: 5}\n"}, [],
     ["suites/s/config.yaml: history.location must be a file path or 'opensearch', got 5"]),
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


SHOW_CONFIG_INPUTS = [case for case in BAD_INPUTS if case[0] in ("unknown-preset", "duplicate-case-ids")]


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
    for run in (pytester.runpytest, lambda *args: pytester.runpytest_subprocess(*args, "-n", "2", timeout=300)):
        result = run("suites", "--strict-markers")  # a collection error of the module, also on xdist workers
        assert result.ret not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        result.stdout.fnmatch_lines(["*ERROR collecting suites/s/test_s.py*",
                                     "cases/s/default.yaml[[]0] (case 'a'): marks: 'slow' not found in `markers`*"])
        assert "During handling" not in result.stdout.str()
        assert "Traceback" not in result.stdout.str() + result.stderr.str()
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result = pytester.runpytest("suites", "-o", "markers=slow: long cases", "--strict-markers", "-m", "slow")
    result.assert_outcomes(passed=1)


XDIST_INPUTS = [case for case in BAD_INPUTS if case[0] in ("duplicate-top-level-key", "cases-an-integer",
                                                           "unknown-reference", "empty-preset-option",
                                                           "fail-on-regression-sometimes", "empty-case-file")]


def test_bad_input_is_one_start_up_error_on_the_xdist_controller(make_project) -> None:
    """Found at configure time by the controller: exit 4 before any worker starts, no per-worker repetition."""
    for name, files, args, fragments in XDIST_INPUTS:
        pytester = project(make_project, **files)
        result = pytester.runpytest_subprocess("suites", "-n", "2", *args, timeout=300)
        output = result.stdout.str() + result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (name, output)
        assert output.count(fragments[0]) == 1, (name, output)
        assert "Traceback" not in output and "INTERNALERROR" not in output, (name, output)


@pytest.mark.parametrize("artifacts", ["/proc/topsail-artifacts", "/proc/version/run", "/dev/null/run"])
def test_artifacts_root_that_cannot_be_created_is_a_start_up_error(make_project, artifacts: str) -> None:
    pytester = project(make_project)
    result = pytester.runpytest("suites", "--artifacts", artifacts)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    result.stderr.fnmatch_lines([f"ERROR: artifacts root (--artifacts, else $ARTIFACT_DIR) {artifacts}: *"])
    assert "Traceback" not in output and "INTERNALERROR" not in output


KEEP_NOT_BOOL = "suites/scale/config.yaml: invalid settings: key tests.scale.keep: Input should be a valid boolean"
SCALE_SUITE_INPUTS = [  # the repository's scale suite: typed settings checked at start-up, before any cluster
    (["--var", "tests.scale.keep='false'"], KEEP_NOT_BOOL),
    (["--var", "tests.scale.keep=1"], KEEP_NOT_BOOL),
    (["--var", "tests.scale.max_failed_jobs=many"],
     "key tests.scale.max_failed_jobs: Input should be a valid integer"),
    (["--var", "tests.scale.max_failed_jobs=1.5"], "key tests.scale.max_failed_jobs: Input should be a valid integer"),
    (["--var", "tests.scale.cleanup_timeout_s=soon"],
     "key tests.scale.cleanup_timeout_s: Input should be a valid number"),
    (["--var", "tests.scale.cleanup_timeout_s=0"],
     "key tests.scale.cleanup_timeout_s: Input should be greater than 0"),
    (["--var", "tests.scale.include_plotlyjs=maybe"],  # one problem under the user's key, not per union member
     "key tests.scale.include_plotlyjs: Input should be 'shared' or 'directory', or a valid boolean (got 'maybe')"),
    (["--var", "tests.scale.progress=yes please"], "key tests.scale.progress: Input should be a valid boolean"),
    (["--var", "tests.scale.namespace_prefix=123"], "key tests.scale.namespace_prefix: Input should be a valid string"),
    (["--var", "tests.scale.thresholds=[{step: Ready, metric: P99}]"], "a threshold needs step, metric and max_ms"),
    (["--var", "tests.scale.thresholds=[{step: Reddy, metric: P99, max_ms: 5}]"], "unknown step 'Reddy'"),
    (["--var", "tests.scale.thresholds={step: Ready}"], "key tests.scale.thresholds: Input should be a valid list"),
    (["--var", "regression.comparison_keys=workload"],
     "suites/scale/config.yaml: invalid regression settings: key regression.comparison_keys: Input should be a "
     "valid list (got 'workload')"),
    (["--var", "regression.fail_on_regression=sometimes"], "key regression.fail_on_regression: Input should be a "
                                                            "valid boolean (got 'sometimes')"),
]

SIM_PROFILE_INPUTS = [  # the simulator profile of cluster.sim: one start-up error, no simulator started
    (["--var", "cluster.sim.nodes=-1"], "suites/scale/config.yaml: invalid simulator profile: key cluster.sim.nodes: "),
    (["--var", "cluster.sim.gpu_profile=z100"],
     "suites/scale/config.yaml: invalid simulator profile: key cluster.sim.gpu_profile: unknown GPU profile 'z100'"),
    (["--var", "cluster.sim.shape=huge"], "suites/scale/config.yaml: cluster.sim.shape: unknown shape 'huge'"),
    (["--var", "cluster.sim.stages.ready.delay_ms=soon"],
     "suites/scale/config.yaml: invalid simulator profile: key cluster.sim.stages.ready.delay_ms: "),
    (["--var", "cluster.sim.gpus_per_node='8'"],
     "suites/scale/config.yaml: invalid simulator profile: key cluster.sim.gpus_per_node: "),
]
SCALE_SUITE_INPUTS += SIM_PROFILE_INPUTS


@pytest.mark.parametrize(("args", "fragment"), SCALE_SUITE_INPUTS, ids=[args[1] for args, _ in SCALE_SUITE_INPUTS])
def test_bad_scale_settings_are_one_start_up_error(args: list[str], fragment: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "pytest", "suites/scale", "-p", "no:cacheprovider", "--co",
                             "-q", *args], cwd=repo, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output and "INTERNALERROR" not in output and "simulated cluster" not in output
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(error_lines) == 1 and fragment in error_lines[0], output


def _history_files(tmp_path) -> dict[str, str]:
    """A damaged SQLite history (valid header, pages overwritten), a garbage import file, a good one."""
    import json
    import sqlite3

    from pytest_topsail.history.sqlite import SqliteHistory

    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps({"name": "k", "value": 1.0, "suite": "s", "timestamp": float(i),
                                          "test_uuid": f"u{i}", "run_id": "r1"}) for i in range(2000)))
    store = SqliteHistory(tmp_path / "damaged.sqlite")
    store.add(json.loads(line) for line in good.read_text().splitlines())
    store.close()
    connection = sqlite3.connect(tmp_path / "damaged.sqlite")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    data = bytearray((tmp_path / "damaged.sqlite").read_bytes())
    data[8192:24576] = b"\x13" * 16384
    (tmp_path / "damaged.sqlite").write_bytes(bytes(data))
    (tmp_path / "garbage.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    store = SqliteHistory(tmp_path / "good.sqlite")
    store.add(json.loads(line) for line in good.read_text().splitlines())
    store.close()
    return {"damaged": str(tmp_path / "damaged.sqlite"), "good": str(tmp_path / "good.sqlite"),
            "garbage": str(tmp_path / "garbage.jsonl"), "missing": str(tmp_path / "missing.sqlite")}


HISTORY_CLI_INPUTS = [  # python -m pytest_topsail.history: every I/O or corruption error is one line, exit 2
    ("export --history {damaged}", "export: KPI history {damaged} is damaged: database disk image is malformed"),
    ("pending --history {damaged} --suite s", "is damaged"),
    ("export --history {missing}", "export: KPI history {missing} does not exist"),
    ("export --history {good} -o /proc/nosuch/out", "export: /proc/nosuch/out: No such file or directory"),
    ("export --history {good} -o /", "export: /: Is a directory"),
    ("import --history {missing} {garbage}", "{garbage}:1: not UTF-8 text"),
    ("pending --history {good} --suite nosuch", "pending: the KPI history holds no record of suite 'nosuch' "
                                                "(suites: s)"),
    ("ack --history {good} --suite s --run nosuch --reason r", "ack: suite s has no record of run 'nosuch'"),
]


@pytest.mark.parametrize(("command", "message"), HISTORY_CLI_INPUTS, ids=[c.split()[0] + "-" + c.split()[-1]
                                                                          for c, _ in HISTORY_CLI_INPUTS])
def test_history_cli_bad_input_is_one_line(tmp_path, capsys: pytest.CaptureFixture[str], command: str,
                                           message: str) -> None:
    from pathlib import Path

    from pytest_topsail.history.__main__ import main

    files = _history_files(tmp_path)
    assert main(command.format(**files).split()) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"error: {message.format(**files)}"] or (
        len(err.splitlines()) == 1 and message.format(**files) in err), err
    assert not Path(files["missing"]).exists()  # reading or a refused import creates no history


SUITE_START_UP_INPUTS = [  # the repository's other suites: one start-up error naming the key the user typed
    ("suites/llm_load", ["--var", "tests.llm_load.gpu_profile=z900"],
     "suites/llm_load/config.yaml: invalid settings: key tests.llm_load.gpu_profile: no latency coefficients for "
     "GPU profile 'z900' (known: a100, a100-80gb, b200, h100, l40s, none, t4); did you mean h100, b200, a100?"),
    ("suites/llm_load", ["--var", "cluster.sim.nodes=-3"],  # the shortcut typed, not node_pools[0].count
     "suites/llm_load/config.yaml: invalid simulator profile: key cluster.sim.nodes: Input should be greater than "
     "or equal to 0 (got -3)"),
    ("suites/llm_load", ["--var", "tests.llm_load.api_key.file=/nonexistent/key"],
     "suites/llm_load/config.yaml: invalid settings: key tests.llm_load.api_key: file /nonexistent/key: not found"),
    ("suites/tgis", ["--var", 'worker.env={"tgis_native|bf15": {A: "1"}}'],  # would reach no worker
     "suites/tgis/config.yaml: invalid settings: key worker.env: 'tgis_native|bf15' names no config of tests.tgis "
     "(configs: hf_transformers|f32, tgis_native|bf16, "),
    # a misspelled model was served (sized as 1B from its name) and failed late as text differences
    ("suites/tgis", ["-n", "2", "--var", "tests.tgis=[{model: google/flan-t5-smal, configs: [{dtype_str: float16}], "
                              "cases: [cases/tgis/flan-t5-small/basic.yaml]}]"],
     "suites/tgis/config.yaml: invalid settings: key tests.tgis[0].model: model 'google/flan-t5-smal' is not in the "
     "model catalog (pytest_topsail/tgis/catalog.yaml); closest known: google/flan-t5-small, "),
    ("suites/tgis", ["--var", "cluster.sim.plugins.kserve.models={my-org/m-7b: {params: 7}}"],  # a declared model
     "suites/tgis/config.yaml: cluster.sim.plugins.kserve.models.my-org/m-7b: key params_billions: required key "
     "missing; key params: unknown key; known: active_params_billions, dtype, params_billions, quantization"),
]


@pytest.mark.parametrize(("suite", "args", "fragment"), SUITE_START_UP_INPUTS,
                         ids=[args[-1] for _, args, _ in SUITE_START_UP_INPUTS])
def test_bad_suite_settings_are_one_start_up_error(suite: str, args: list[str], fragment: str) -> None:
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    began = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", suite, "-p", "no:cacheprovider", "--co", "-q", *args],
                            cwd=repo, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(error_lines) == 1 and fragment in error_lines[0], output
    assert time.monotonic() - began < 90, "a start-up error, not a wait (5 s on an idle machine, 2 shared cores here)"


LLM_LOAD_CASES = [  # llm_load case points checked at start-up (were caught at their item, after deploying)
    ("mode: constant\n  duration_s: 1", "case c: mode constant needs rate > 0 (requests/s)"),
    ("concurrency: [1]\n  duration_s: 1\n  server: {max_batch_size: 8, max_batch_sise: 3}",
     "case c: invalid TGIS model config: key server.max_batch_sise: unknown key; known: "),
    ("concurrency: [1]\n  duration_s: 1\n  server: {revision: main}",
     "case c: server: revision cannot be given to an InferenceService (known: "),
]


@pytest.mark.parametrize(("point", "fragment"), LLM_LOAD_CASES, ids=["constant-no-rate", "unknown-server-key",
                                                                     "server-key-not-served"])
def test_bad_llm_load_case_is_one_start_up_error(tmp_path, point: str, fragment: str) -> None:
    case_file = tmp_path / "cases.yaml"
    case_file.write_text(f"- name: c\n  model: bigscience/bloom-560m\n  backend: tgis\n  {point}\n")
    test_bad_suite_settings_are_one_start_up_error("suites/llm_load", ["--var", f"cases=[{case_file}]", "-n", "2"],
                                                   f"{case_file}[0]: {fragment}")


def test_misspelled_llm_load_model_is_one_start_up_error_naming_file_case_and_closest(tmp_path) -> None:
    case_file = tmp_path / "cases.yaml"
    case_file.write_text("- name: c\n  model: bigscience/blom-560m\n  backend: tgis\n  concurrency: [1]\n"
                         "  duration_s: 1\n")
    test_bad_suite_settings_are_one_start_up_error(
        "suites/llm_load", ["--var", f"cases=[{case_file}]", "-n", "2"],
        f"{case_file}[0]: case c: model 'bigscience/blom-560m' is not in the model catalog "
        "(pytest_topsail/tgis/catalog.yaml); closest known: bigscience/bloom-560m")


FINE_TUNING_CASES = [  # fine-tuning points checked at start-up against the catalog (were caught at their item)
    ("dataset: {name: alpaka}", "(case c): dataset 'alpaka' is not in the catalog (known: "),
    ("method: full\n  lora: {r: 8}", "(case c): lora settings given, but every point uses method: full"),
    ("max_seq_length: 1000000", "(case c): max_seq_length 1000000 is beyond the maximum of model "
                                "bigscience/bloom-560m (2048 positions)"),
    ("per_device_batch_size: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n  max_seq_length: [64, 128, 256, 512, 1024, 2048]\n"
     "  epochs: [1, 2, 3, 4, 5, 6, 7, 8, 9]",
     "the matrix has 540 points, more than max_points (500): each point is one PyTorchJob; training alone takes "
     "about "),  # the estimate: tests/fine_tuning/test_logic.py
]


@pytest.mark.parametrize(("point", "fragment"), FINE_TUNING_CASES, ids=["unknown-dataset", "lora-on-full",
                                                                        "max-seq-length", "matrix-too-big"])
def test_bad_fine_tuning_point_is_one_start_up_error(tmp_path, point: str, fragment: str) -> None:
    case_file = tmp_path / "cases.yaml"
    case_file.write_text(f"- name: c\n  model: bigscience/bloom-560m\n  {point}\n")
    test_bad_suite_settings_are_one_start_up_error("suites/fine_tuning", ["--var", f"cases=[{case_file}]", "-n", "2"],
                                                   fragment)
