"""PR directives: a PR comment (/test, /var) or TOPSAIL CI's variable_overrides.yaml gives presets and overrides,
applied in TOPSAIL's order; each bad line is named (file:line), all at once."""

from __future__ import annotations

import pytest
import yaml

from pytest_topsail.errors import TopsailError
from pytest_topsail.pr_args import parse_comment, parse_overrides_file, presets_from_environment, read_pr_args

COMMENT = """\
Please run the light test with more GPUs.

/test fine-tuning-e2e light big
/var tests.fine_tuning.test_settings.gpu: 4
/var tests.fine_tuning.test_settings.name: null
/var tests.llama.args[1]: [a, b]
"""


def test_comment_gives_presets_and_typed_overrides() -> None:
    found = parse_comment(COMMENT, "pr.txt")
    assert found.preset_names == ["light", "big"]  # the job's name is no preset
    assert found.override_pairs == [("tests.fine_tuning.test_settings.gpu", 4),
                                    ("tests.fine_tuning.test_settings.name", None), ("tests.llama.args[1]", ["a", "b"])]
    assert [d.origin for d in found.overrides] == ["pr.txt:4", "pr.txt:5", "pr.txt:6"]


def test_every_bad_line_is_named_at_once() -> None:
    text = "/test job a\n/var novalue\n/skip cleanup\n/var a..b: 1\n/test job b\n/var x: [1, 2\n"
    with pytest.raises(TopsailError) as raised:
        parse_comment(text, "pr.txt")
    lines = str(raised.value).splitlines()
    assert lines[0] == "PR directives:"
    assert [line.split(": ", 1)[0].strip() for line in lines[1:]] == [
        "pr.txt:2", "pr.txt:3", "pr.txt:4", "pr.txt:5", "pr.txt:6"]
    assert "expected '/var KEY: VALUE'" in lines[1] and "unknown directive '/skip'" in lines[2]
    assert "invalid configuration key 'a..b'" in lines[3] and "a second /test line (the first is line 1)" in lines[4]
    assert "not valid YAML" in lines[5]


def test_topsail_ci_overrides_file() -> None:
    text = ("PR_POSITIONAL_ARG_0: fine-tuning-e2e\nPR_POSITIONAL_ARG_2: big\nPR_POSITIONAL_ARG_1: light  extra\n"
            "PR_POSITIONAL_ARGS: light extra big\ntests.x.gpu: 2\n")
    found = parse_overrides_file(text, "variable_overrides.yaml")
    assert found.preset_names == ["light", "extra", "big"]
    assert found.override_pairs == [("tests.x.gpu", 2)]
    assert found.overrides[0].origin == "variable_overrides.yaml:5"
    with pytest.raises(TopsailError, match=r"variable_overrides.yaml:1: PR_POSITIONAL_ARG_1 must be preset names"):
        parse_overrides_file("PR_POSITIONAL_ARG_1: [a]\n", "variable_overrides.yaml")


def test_environment_and_artifact_dir(tmp_path) -> None:
    assert [d.key for d in presets_from_environment({"PR_POSITIONAL_ARG_2": "b", "PR_POSITIONAL_ARG_1": "a c",
                                                     "PR_POSITIONAL_ARG_0": "job"})] == ["a", "c", "b"]
    (tmp_path / "variable_overrides.yaml").write_text("tests.x: 1\n")
    found = read_pr_args(None, tmp_path, {"ARTIFACT_DIR": str(tmp_path), "PR_POSITIONAL_ARG_1": "light"})
    assert (found.preset_names, found.override_pairs) == (["light"], [("tests.x", 1)])
    assert read_pr_args(None, tmp_path, {}).preset_names == []


PROJECT_CONFIG = """
cases: [cases/scale/default.yaml]
cluster:
  sim: {nodes: 100}
tests:
  scale: {jobs: [1, 2], namespace: ns}
ci_presets:
  to_apply: base
  variable_overrides: {tests.scale.namespace: from-overrides}
  base: {cluster.sim.nodes: 50}
  small:
    cluster.sim.nodes: 10
    tests.scale.jobs[1]: 20
"""
PROJECT_TESTS = """
def test_config(topsail_config, topsail_suite):
    print("CONFIG", topsail_config.get("cluster.sim.nodes"), topsail_config.get("tests.scale.jobs"),
          topsail_config.get("tests.scale.namespace"), topsail_suite.presets_applied)
"""


def pr_project(make_project) -> pytest.Pytester:
    return make_project({"suites/scale/config.yaml": PROJECT_CONFIG, "suites/scale/test_scale.py": PROJECT_TESTS,
                         "cases/scale/default.yaml": "- name: one\n"})


def test_pr_args_option_applies_presets_then_var_lines(make_project) -> None:
    pytester = pr_project(make_project)
    (pytester.path / "comment.txt").write_text("/test scale small\n/var cluster.sim.nodes: 3\n")
    result = pytester.runpytest("suites", "-s", "--topsail-pr-args", "comment.txt")
    assert result.ret == 0, result.stdout.str()
    assert "CONFIG 3 [1, 20] from-overrides ['base', 'small']" in result.stdout.str()


def test_ci_overrides_file_in_artifact_dir(make_project, monkeypatch) -> None:
    pytester = pr_project(make_project)
    artifacts = pytester.path / "ci-artifacts"
    artifacts.mkdir()
    (artifacts / "variable_overrides.yaml").write_text(yaml.safe_dump(
        {"PR_POSITIONAL_ARG_0": "scale", "PR_POSITIONAL_ARG_1": "small", "tests.scale.namespace": "pr"}))
    monkeypatch.setenv("ARTIFACT_DIR", str(artifacts))
    result = pytester.runpytest("suites", "-s")
    assert result.ret == 0, result.stdout.str()
    assert "CONFIG 10 [1, 20] pr ['base', 'small']" in result.stdout.str()


def test_unknown_preset_and_key_name_their_lines(make_project) -> None:
    pytester = pr_project(make_project)
    (pytester.path / "comment.txt").write_text("/test scale smal\n/var tests.scale.job: 3\n")
    result = pytester.runpytest("suites", "--topsail-pr-args", "comment.txt")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*comment.txt:1: preset 'smal' is defined by no collected suite (presets per suite: scale: base, small)",
        "*comment.txt:2: 'tests.scale.job' is not a configuration key of any collected suite; closest existing keys: "
        "tests.scale.jobs*"])


def test_show_config_lists_presets_not_topsail_bookkeeping(make_project) -> None:
    pytester = pr_project(make_project)
    result = pytester.runpytest("suites", "--topsail-show-config")
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str()
    assert "#   base\n#   small\n" in text
    assert "#   to_apply" not in text and "#   variable_overrides" not in text
