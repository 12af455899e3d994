"""The suite contract in fresh temporary projects: discovery, markers, case parametrization, fixtures, presets,
--var, --topsail-show-config, artifacts and the item record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

pytest_plugins = ["pytester"]

CONFIG = """
cases: [cases/scale/default.yaml]
cluster:
  sim: {nodes: 100}
tests:
  scale:
    namespace: scale-test
    ns_copy: "@tests.scale.namespace"
    thresholds: [{step: Ready, max_ms: 5000}]
ci_presets:
  smoke:
    cases: [cases/scale/smoke.yaml]
    cluster.sim.nodes: 10
  tiny:
    extends: [smoke]
    cluster.sim.nodes: 1
"""

CASES = {
    "cases/scale/default.yaml": """
        - name: training
          jobs: [20, 50]
          qps: 20
        - name: interactive
          pods: 3
    """,
    "cases/scale/smoke.yaml": """
        - name: smoke
          jobs: 2
    """,
}

TESTS = """
import pytest

def test_jobs(case, topsail_config, artifact_dir):
    (artifact_dir / "seen.txt").write_text(case.id)
    assert topsail_config.get("tests.scale.ns_copy") == "scale-test"
    assert case.name in ("training", "interactive", "smoke")

def test_nodes(topsail_config, topsail_suite):
    assert topsail_suite.name == "scale"
    print("NODES", topsail_config.get("cluster.sim.nodes"), "PRESETS", topsail_suite.presets_applied)

def test_fails(case):
    assert case.name != "interactive"
"""

RECORDER = """
import json

def pytest_runtest_logreport(report):
    record = getattr(report, "topsail", None)
    if record is not None:
        with open("records.jsonl", "a") as out:
            out.write(json.dumps({"when": report.when, **record.to_dict()}) + "\\n")

def pytest_topsail_labels(item):
    return {"cluster": "sim", "item": item.name}
"""


def scale_project(make_project, extra: dict[str, str] | None = None) -> pytest.Pytester:
    files = {"suites/scale/config.yaml": CONFIG, "suites/scale/test_scale.py": TESTS, "conftest.py": RECORDER,
             "tests/test_unit.py": "def test_unit():\n    pass\n", **CASES}
    files.update(extra or {})
    return make_project(files)


def artifacts_of(pytester: pytest.Pytester) -> Path:
    (root,) = list((pytester.path / "artifacts").iterdir())
    return root


def records(pytester: pytest.Pytester) -> list[dict]:
    path = pytester.path / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_cases_parametrize_with_readable_ids_and_suite_marker(make_project) -> None:
    pytester = scale_project(make_project)
    result = pytester.runpytest("suites", "-m", "scale", "--strict-markers", "--collect-only", "-q")
    result.assert_outcomes()
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "suites/scale/test_scale.py::test_jobs[[]training-jobs=20[]]",
        "suites/scale/test_scale.py::test_jobs[[]training-jobs=50[]]",
        "suites/scale/test_scale.py::test_jobs[[]interactive[]]",
        "suites/scale/test_scale.py::test_nodes",
        "suites/scale/test_scale.py::test_fails[[]training-jobs=20[]]",
        "*7 tests collected*",
    ])
    assert not (pytester.path / "artifacts").exists()  # collection alone creates nothing


def test_marker_selects_suite_items_only(make_project) -> None:
    pytester = scale_project(make_project)
    result = pytester.runpytest(".", "-m", "not scale", "--strict-markers", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["tests/test_unit.py::test_unit", "*1/8 tests collected (7 deselected)*"])


def test_run_writes_item_directories_settings_exit_code_and_suite_config(make_project) -> None:
    pytester = scale_project(make_project)
    result = pytester.runpytest("suites")
    result.assert_outcomes(passed=6, failed=1)
    root = artifacts_of(pytester)
    result.stdout.fnmatch_lines([f"topsail artifacts: {root}"])
    suite_dir = root / "scale"
    names = sorted(path.name for path in suite_dir.iterdir() if path.is_dir())
    assert names == ["001__test_jobs_training-jobs=20", "002__test_jobs_training-jobs=50", "003__test_jobs_interactive",
                     "004__test_nodes", "005__test_fails_training-jobs=20", "006__test_fails_training-jobs=50",
                     "007__test_fails_interactive"]
    first = suite_dir / names[0]
    assert yaml.safe_load((first / "settings.yaml").read_text()) == {"jobs": 20, "qps": 20}
    assert (first / "exit_code").read_text().strip() == "0"
    assert (first / "seen.txt").read_text() == "training-jobs=20"
    assert (suite_dir / names[6] / "exit_code").read_text().strip() == "1"
    failure = (suite_dir / names[6] / "FAILURE").read_text()
    assert failure.startswith("call failed:") and "assert case.name != \"interactive\"" in failure
    assert not (first / "FAILURE").exists()
    assert yaml.safe_load((suite_dir / names[3] / "settings.yaml").read_text()) == {}
    effective = yaml.safe_load((suite_dir / "config.yaml").read_text())
    assert effective["presets_applied"] == []
    assert effective["tests"]["scale"]["ns_copy"] == "scale-test"
    assert "ci_presets" not in effective


def test_item_record_on_teardown_report(make_project) -> None:
    pytester = scale_project(make_project)
    pytester.runpytest("suites/scale/test_scale.py::test_fails")
    by_id = {record["test_id"]: record for record in records(pytester)}
    assert set(by_id) == {"test_fails[training-jobs=20]", "test_fails[training-jobs=50]", "test_fails[interactive]"}
    assert {record["when"] for record in by_id.values()} == {"teardown"}
    failed = by_id["test_fails[interactive]"]
    assert failed["outcome"] == "failed" and by_id["test_fails[training-jobs=20]"]["outcome"] == "passed"
    assert failed["suite"] == "scale"
    assert failed["nodeid"] == "suites/scale/test_scale.py::test_fails[interactive]"
    assert failed["case"] == {"name": "interactive", "id": "interactive", "settings": {"pods": 3}}
    assert failed["labels"] == {"cluster": "sim", "item": "test_fails[interactive]"}
    assert failed["kpis"] == [] and failed["figures"] == []
    assert failed["start"] <= failed["end"]
    assert (Path(failed["artifact_dir"]) / "exit_code").read_text().strip() == "1"


def test_presets_and_vars_from_command_line(make_project) -> None:
    pytester = scale_project(make_project)
    result = pytester.runpytest("suites", "--preset", "tiny", "--var", "tests.scale.namespace=other", "-s",
                                "-k", "test_nodes or test_jobs")
    result.assert_outcomes(passed=1, failed=1)  # smoke case only; ns_copy follows the --var
    assert "NODES 1 PRESETS ['tiny', 'smoke']" in result.stdout.str()  # TOPSAIL's order: before its extends
    result.stdout.fnmatch_lines(["*test_jobs[[]smoke[]]*"])
    effective = yaml.safe_load((artifacts_of(pytester) / "scale" / "config.yaml").read_text())
    assert effective["presets_applied"] == ["tiny", "smoke"]
    assert effective["cases"] == ["cases/scale/smoke.yaml"]
    assert effective["tests"]["scale"]["ns_copy"] == "other"


def test_comma_separated_presets_and_to_apply(make_project) -> None:
    config = CONFIG.replace("ci_presets:\n", "ci_presets:\n  to_apply: [smoke]\n  big:\n    cluster.sim.nodes: 500\n")
    pytester = scale_project(make_project, {"suites/scale/config.yaml": config})
    result = pytester.runpytest("suites", "--preset", "big,tiny", "-s", "-k", "test_nodes")
    assert "NODES 1 PRESETS ['smoke', 'big', 'tiny']" in result.stdout.str()  # each once, as TOPSAIL records


def test_show_config_prints_effective_config_and_exits_zero(make_project) -> None:
    pytester = scale_project(make_project)
    result = pytester.runpytest("suites", "--preset", "smoke", "--var", "cluster.sim.nodes=7", "--topsail-show-config")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["# suite scale (suites/scale/config.yaml); presets applied: smoke",
                                 "cases:", "- cases/scale/smoke.yaml", "*nodes: 7*", "*ns_copy: scale-test*"])
    assert "passed" not in result.stdout.str()
    assert not (pytester.path / "artifacts").exists()


def _output_lines(result: pytest.RunResult) -> list[str]:
    """Output without the lines that differ between any two runs (timing) or name the installed plugins."""
    lines = result.stdout.lines + result.stderr.lines
    return [re.sub(r" in [0-9.]+s", "", line) for line in lines if not line.startswith(("plugins:", "rootdir:"))]


def test_run_without_suite_is_untouched(make_project) -> None:
    pytester = scale_project(make_project)
    result = pytester.runpytest("tests", "-rA")
    result.assert_outcomes(passed=1)
    # pytest's own header lists installed plugins ("plugins: topsail-0.1.0, ..."); nothing else may mention us.
    assert [line for line in _output_lines(result) if "topsail" in line] == []
    assert not (pytester.path / "artifacts").exists()
    assert not (pytester.path / "records.jsonl").exists()
    (pytester.path / "conftest.py").unlink()  # it implements our hook, which needs the plugin
    with_plugin = pytester.runpytest("tests", "-rA")
    without_plugin = pytester.runpytest("tests", "-rA", "-p", "no:topsail")
    assert _output_lines(with_plugin) == _output_lines(without_plugin)


def test_preset_not_checked_when_no_suite_is_collected(make_project) -> None:
    pytester = make_project({"suites/README.md": "no suite yet\n"})
    result = pytester.runpytest("suites", "--preset", "smoke")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "ERROR" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "artifacts").exists()


def test_case_fixture_outside_suites_is_left_alone(make_project) -> None:
    pytester = scale_project(make_project, {"tests/test_own_case.py": """
        import pytest

        @pytest.fixture
        def case():
            return "project's own fixture"

        def test_it(case):
            assert case == "project's own fixture"
    """})
    pytester.runpytest("tests").assert_outcomes(passed=2)


def test_artifacts_option_and_environment(make_project, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester = scale_project(make_project)
    pytester.runpytest("suites", "--artifacts", "out", "-k", "test_nodes").assert_outcomes(passed=1)
    assert (pytester.path / "out" / "scale" / "001__test_nodes" / "exit_code").is_file()
    monkeypatch.setenv("ARTIFACT_DIR", str(pytester.path / "from-env"))
    pytester.runpytest("suites", "-k", "test_nodes").assert_outcomes(passed=1)
    assert (pytester.path / "from-env" / "scale" / "001__test_nodes").is_dir()
    assert not (pytester.path / "artifacts").exists()


def test_skipped_item_gets_skip_file(make_project) -> None:
    pytester = scale_project(make_project, {"suites/scale/test_skip.py": """
        import pytest

        def test_skipped():
            pytest.skip("not today")
    """})
    pytester.runpytest("suites/scale/test_skip.py").assert_outcomes(skipped=1)
    (item_dir,) = (artifacts_of(pytester) / "scale").glob("*__test_skipped")
    assert (item_dir / "skip").is_file() and (item_dir / "exit_code").read_text().strip() == "0"


def test_config_set_refuses_unknown_key_with_clean_message(make_project) -> None:
    pytester = scale_project(make_project, {"suites/scale/test_set.py": """
        def test_set(topsail_config):
            topsail_config.set("tests.scale.namespace", "changed")
            assert topsail_config.get("tests.scale.ns_copy") == "changed"
            topsail_config.set("tests.scale.namespaces", "x")
    """})
    result = pytester.runpytest("suites/scale/test_set.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TopsailError: suites/scale/config.yaml: unknown configuration key "
                                 "'tests.scale.namespaces'; closest existing keys: tests.scale.namespace*"])
    assert "Traceback" not in result.stdout.str()


def test_explicit_case_parametrization_is_respected(make_project) -> None:
    pytester = scale_project(make_project, {"suites/scale/test_custom.py": """
        import pytest
        from pytest_topsail.cases import case_params, expand_case

        MODELS = ["llama", "granite"]
        CASES = [case for model in MODELS
                 for case in expand_case({"name": model, "users": [1, 4]}, f"models/{model}")]

        @pytest.mark.parametrize("case", case_params(CASES))
        def test_model(case, topsail_config):
            assert case.settings["users"] in (1, 4)
    """})
    result = pytester.runpytest("suites/scale/test_custom.py", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_model[[]llama-users=1[]]", "*test_model[[]granite-users=4[]]",
                                 "*4 tests collected*"])


def test_suite_without_cases_key_does_not_parametrize(make_project) -> None:
    pytester = make_project({"suites/plain/config.yaml": "a: 1\n",
                             "suites/plain/conftest.py": "import pytest\n\n@pytest.fixture\ndef case():\n"
                                                         "    return 'own'\n",
                             "suites/plain/test_p.py": "def test_p(case, topsail_config):\n"
                                                       "    assert case == 'own' and topsail_config.get('a') == 1\n"})
    pytester.runpytest("suites", "-m", "plain", "--strict-markers").assert_outcomes(passed=1)


def test_secret_values_stay_out_of_artifacts_and_show_config(make_project) -> None:
    config = CONFIG.replace("cluster:\n", "history:\n  password: hunter2\ncluster:\n")
    pytester = scale_project(make_project, {"suites/scale/config.yaml": config, "suites/scale/test_secret.py": """
        def test_secret(topsail_config):
            assert topsail_config.get("history.password") == "hunter2"
    """})
    pytester.runpytest("suites/scale/test_secret.py").assert_outcomes(passed=1)
    written = (artifacts_of(pytester) / "scale" / "config.yaml").read_text()
    assert "hunter2" not in written and "password: <redacted>" in written
    shown = pytester.runpytest("suites", "--topsail-show-config")
    assert "hunter2" not in shown.stdout.str() and "password: <redacted>" in shown.stdout.str()


def test_item_that_removes_its_own_directory_gets_a_warning_not_an_internal_error(make_project) -> None:
    pytester = scale_project(make_project, {"suites/scale/test_rm.py": """
        import shutil

        def test_rm(artifact_dir):
            shutil.rmtree(artifact_dir)
    """})
    result = pytester.runpytest("suites/scale/test_rm.py")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*topsail: cannot write the item files of suites/scale/test_rm.py::test_rm*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_item_directory_that_cannot_be_created_is_a_warning(make_project) -> None:
    pytester = scale_project(make_project)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / "scale").write_text("a file where the suite directory goes")
    result = pytester.runpytest("suites", "--artifacts", "out", "-k", "test_nodes")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*topsail: cannot create the artifact directory of *test_nodes*"])
    assert "INTERNALERROR" not in result.stdout.str()


CONTROLLER_RECORDER = """
import json

from pytest_topsail.xdist_role import role_of

CONFIGS = []

def pytest_configure(config):
    CONFIGS.append(config)

def pytest_runtest_logreport(report):
    record = getattr(report, "topsail", None)
    if record is not None and not role_of(CONFIGS[0]).is_worker:
        with open("records.jsonl", "a") as out:
            out.write(json.dumps({"when": report.when, "type": type(record).__name__, **record.to_dict()}) + "\\n")
"""


def test_the_typed_item_record_crosses_the_xdist_boundary(make_project) -> None:
    pytester = scale_project(make_project, {"conftest.py": CONTROLLER_RECORDER})
    result = pytester.runpytest("suites/scale/test_scale.py::test_fails", "-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=2, failed=1)
    by_id = {record["test_id"]: record for record in records(pytester)}
    assert len(by_id) == 3 and {record["type"] for record in by_id.values()} == {"ItemRecord"}
    failed = by_id["test_fails[interactive]"]
    assert failed["outcome"] == "failed" and failed["version"] == 1
    assert failed["case"] == {"name": "interactive", "id": "interactive", "settings": {"pods": 3}}
