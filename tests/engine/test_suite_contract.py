"""The suite contract end to end (pytester): matrix expansion into items and settings.yaml, ids that select one item
each, a suite building its own matrix (TGIS: model configs x cases), presets across several suites."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest_plugins = ["pytester"]

MATRIX_CASES = """
- name: ft
  model: llama
  gpus: [1, 2]
  lora: {r: [4, 8], alpha: 16}
  args: [--bf16, --compile]
  raw_lists: [args]
  skip_if: [{gpus: 2, lora.r: 8}]
- name: alt
  model: llama
  extra_settings:
    - {model: granite}
    - {model: mistral, batch: [8, 16]}
"""


def matrix_project(make_project) -> pytest.Pytester:
    return make_project({
        "suites/ft/config.yaml": "cases: [cases/ft/*.yaml]\n",
        "cases/ft/matrix.yaml": MATRIX_CASES,
        "suites/ft/test_ft.py": "def test_train(case):\n    assert case.settings['model']\n",
    })


def collected_ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::" in line]


def test_matrix_expansion_gives_items_ids_and_settings(make_project) -> None:
    pytester = matrix_project(make_project)
    result = pytester.runpytest("suites", "--artifacts", "out")
    result.assert_outcomes(passed=6)
    item_dirs = sorted((pytester.path / "out" / "ft").glob("0*"))
    assert [path.name for path in item_dirs] == [
        "001__test_train_ft-gpus=1-lora.r=4", "002__test_train_ft-gpus=1-lora.r=8",
        "003__test_train_ft-gpus=2-lora.r=4",
        "004__test_train_alt-model=granite-batch=null", "005__test_train_alt-model=mistral-batch=8",
        "006__test_train_alt-model=mistral-batch=16"]
    settings = [yaml.safe_load((path / "settings.yaml").read_text()) for path in item_dirs]
    assert settings[1] == {"model": "llama", "gpus": 1, "lora": {"r": 8, "alpha": 16}, "args": ["--bf16", "--compile"]}
    assert settings[3] == {"model": "granite"}
    assert settings[5] == {"model": "mistral", "batch": 16}


ODD_CASES = """
- name: llama 3 8b
  model: [ibm/granite-7b, "meta/llama::3"]
  prompt: ["h\u00e9llo", "a[1]"]
- name: floats
  lr: [0.1, 1.0e-5]
"""


def test_every_id_selects_exactly_its_own_item(make_project) -> None:
    pytester = make_project({
        "suites/s/config.yaml": "cases: [cases/s.yaml]\n",
        "cases/s.yaml": ODD_CASES,
        "suites/s/test_s.py": "def test_a(case):\n    print('RAN', case.id)\n",
    })
    listing = pytester.runpytest("suites", "--collect-only", "-q")
    nodeids = collected_ids(listing)
    assert len(nodeids) == 6
    assert collected_ids(pytester.runpytest("suites", "--collect-only", "-q")) == nodeids  # stable order
    # one by one, as an IDE runs them: escaped non-ASCII, "::" and brackets inside ids, spaces, floats
    for nodeid in nodeids:
        result = pytester.runpytest(nodeid, "-s")
        result.assert_outcomes(passed=1)
        ran = [line for line in result.stdout.lines if line.startswith("RAN ") or ".py RAN " in line]
        assert len(ran) == 1, (nodeid, result.stdout.str())


TGIS_CONFTEST = """
from pytest_topsail.cases import load_cases, parametrize_cases, with_variant
from pytest_topsail.suites import suite_of_path


def pytest_generate_tests(metafunc):
    if "case" not in metafunc.fixturenames:
        return
    suite = suite_of_path(metafunc.config, metafunc.definition.path)
    cases = []
    for model in suite.config.get("tests.tgis.models"):
        model_cases = load_cases(model["cases"], suite.rootdir)
        for name, model_config in model["configs"].items():
            cases += with_variant(model_cases, f"{model['name']}-{name}",
                                  settings={"model": model["name"], "model_config": model_config},
                                  xdist_group=f"{model['name']}-{name}")
    parametrize_cases(metafunc, cases)
"""

TGIS_CONFIG = """
tests:
  tgis:
    models:
      - name: granite
        cases: [cases/tgis/granite.yaml]
        configs: {f16: {dtype: float16}, f32: {dtype: float32}}
ci_presets:
  smoke:
    tests.tgis.models:
      - name: granite
        cases: [cases/tgis/granite.yaml]
        configs: {f16: {dtype: float16}}
"""


def test_suite_builds_its_own_matrix_from_engine_functions(make_project) -> None:
    pytester = make_project({
        "suites/tgis/config.yaml": TGIS_CONFIG,
        "suites/tgis/conftest.py": TGIS_CONFTEST,
        "cases/tgis/granite.yaml": "- name: greedy\n  max_new_tokens: [10, 20]\n- name: sample\n",
        "suites/tgis/test_tgis.py": """
            def test_generate(case, artifact_dir):
                assert case.settings["model_config"]["dtype"] in ("float16", "float32")
        """,
    })
    result = pytester.runpytest("suites", "--collect-only", "-q")
    assert collected_ids(result) == [f"suites/tgis/test_tgis.py::test_generate[granite-{config}-{case}]"
                                     for config in ("f16", "f32")
                                     for case in ("greedy-max_new_tokens=10", "greedy-max_new_tokens=20", "sample")]
    result = pytester.runpytest("suites", "--preset", "smoke", "--artifacts", "out")
    result.assert_outcomes(passed=3)
    (item_dir,) = (pytester.path / "out" / "tgis").glob("*sample")
    assert yaml.safe_load((item_dir / "settings.yaml").read_text()) == {
        "model": "granite", "model_config": {"dtype": "float16"}}


def test_suite_matrix_with_duplicate_ids_is_one_clear_error(make_project) -> None:
    pytester = make_project({
        "suites/tgis/config.yaml": TGIS_CONFIG,
        "suites/tgis/conftest.py": TGIS_CONFTEST.replace('f"{model[\'name\']}-{name}",', '"same",'),
        "cases/tgis/granite.yaml": "- name: sample\n",
        "suites/tgis/test_tgis.py": "def test_generate(case):\n    pass\n",
    })
    result = pytester.runpytest("suites")
    assert result.ret != 0
    assert "duplicate case id 'same-sample'" in result.stdout.str() + result.stderr.str()


TWO_SUITES = {
    "suites/scale/config.yaml": """
        cases: [cases/scale/default.yaml]
        nodes: 100
        ci_presets:
          smoke:
            cases: [cases/scale/smoke.yaml]
            nodes: 10
    """,
    "suites/ft/config.yaml": "gpus: 8\nci_presets:\n  dgx:\n    gpus: 16\n",
    "cases/scale/default.yaml": "- name: big\n  jobs: 1000\n",
    "cases/scale/smoke.yaml": "- name: small\n  jobs: 2\n",
    "suites/scale/test_scale.py": "def test_jobs(case, topsail_config):\n    assert topsail_config.get('nodes')\n",
    "suites/ft/test_ft.py": "def test_train(topsail_config):\n    assert topsail_config.get('gpus') == 8\n",
}


def test_preset_applies_only_in_suites_defining_it(make_project) -> None:
    pytester = make_project(TWO_SUITES)
    result = pytester.runpytest("suites", "--preset", "smoke", "--artifacts", "out", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_jobs[[]small[]] PASSED*"])
    scale = yaml.safe_load((pytester.path / "out" / "scale" / "config.yaml").read_text())
    ft = yaml.safe_load((pytester.path / "out" / "ft" / "config.yaml").read_text())
    assert (scale["presets_applied"], scale["nodes"]) == (["smoke"], 10)
    assert (ft["presets_applied"], ft["gpus"]) == ([], 8)


def test_unknown_preset_lists_presets_per_suite(make_project) -> None:
    pytester = make_project(TWO_SUITES)
    result = pytester.runpytest("suites", "--preset", "smok")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: --preset 'smok' is defined by no collected suite (presets per suite: ft: dgx; scale: smoke)"
            in result.stderr.str())


def test_suite_markers_are_registered_for_strict_markers(make_project) -> None:
    pytester = make_project(TWO_SUITES)
    result = pytester.runpytest("suites", "-m", "ft", "--strict-markers")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.ft: items of the topsail suite ft",
                                 "@pytest.mark.scale: items of the topsail suite scale"])


def test_show_config_prints_every_suite_and_runs_nothing(make_project) -> None:
    pytester = make_project(TWO_SUITES)
    result = pytester.runpytest("suites", "--topsail-show-config", "--preset", "dgx", "--var", "nodes=5")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["# suite ft (suites/ft/config.yaml); presets applied: dgx", "gpus: 16",
                                 "presets_applied:", "- dgx",
                                 "# suite scale (suites/scale/config.yaml); presets applied: none", "nodes: 5",
                                 "# 1 case: big"])
    assert "passed" not in result.stdout.str() and not Path(pytester.path / "artifacts").exists()


def test_edited_case_file_is_read_again(make_project) -> None:
    pytester = matrix_project(make_project)
    first = collected_ids(pytester.runpytest("suites", "--collect-only", "-q"))
    assert (pytester.path / ".pytest_cache" / "d" / "topsail-yaml").is_dir()  # parsed cases kept for the next run
    case_file = pytester.path / "cases" / "ft" / "matrix.yaml"
    case_file.write_text(case_file.read_text().replace("gpus: [1, 2]", "gpus: [1, 4]"))
    second = collected_ids(pytester.runpytest("suites", "--collect-only", "-q"))
    assert "suites/ft/test_ft.py::test_train[ft-gpus=2-lora.r=4]" in first
    assert "suites/ft/test_ft.py::test_train[ft-gpus=4-lora.r=4]" in second
    assert not any("gpus=2" in nodeid for nodeid in second)
