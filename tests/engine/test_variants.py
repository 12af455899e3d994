"""Variants as data (config.yaml `variants:`): a TGIS-shaped suite, 3 model configs x 2 case files, built by the
engine; ids, xdist groups, -n 2; bad variant input is one message naming the config key, exit 4, no traceback."""

from __future__ import annotations

import re

import pytest

CONFIG = """
variants:
  - name: flan
    cases: [cases/tgis/greedy.yaml, cases/tgis/sample.yaml]
    settings: {model: flan-t5}
    alternatives:
      f16: {model_config: {dtype: float16}}
      f32: {model_config: {dtype: float32}}
  - name: granite
    cases: [cases/tgis/greedy.yaml, cases/tgis/sample.yaml]
    settings: {model: granite, model_config: {dtype: bfloat16}}
ci_presets:
  smoke:
    variants:
      - name: flan
        cases: [cases/tgis/greedy.yaml]
        settings: {model: flan-t5, model_config: {dtype: float16}}
"""

TEST = """
import os
from pathlib import Path

def test_generate(case):
    line = (f"RAN {case.id} {case.settings['model']} {case.settings['model_config']['dtype']} "
            f"{case.settings['tokens']} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}")
    with (Path(__file__).parents[2] / "ran.txt").open("a") as ran:
        ran.write(line + "\\n")
"""

CASES = {
    "cases/tgis/greedy.yaml": "- name: greedy\n  tokens: [10, 20]\n",
    "cases/tgis/sample.yaml": "- name: sample\n  tokens: 5\n",
}

IDS = [f"{variant}-{case}" for variant in ("flan-f16", "flan-f32", "granite")
       for case in ("greedy-tokens=10", "greedy-tokens=20", "sample")]


def tgis_project(make_project, config: str = CONFIG) -> pytest.Pytester:
    return make_project({"suites/tgis/config.yaml": config, "suites/tgis/test_tgis.py": TEST, **CASES})


def collected_ids(result: pytest.RunResult) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "::" in line]


def test_variants_build_the_items_with_prefixed_ids_and_merged_settings(make_project) -> None:
    pytester = tgis_project(make_project)
    assert collected_ids(pytester.runpytest("suites", "--collect-only", "-q")) == IDS
    result = pytester.runpytest("suites/tgis/test_tgis.py::test_generate[flan-f32-greedy-tokens=20]",
                                "suites/tgis/test_tgis.py::test_generate[granite-sample]", "-s")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "ran.txt").read_text().splitlines() == [
        "RAN flan-f32-greedy-tokens=20 flan-t5 float32 20 main", "RAN granite-sample granite bfloat16 5 main"]
    smoke = pytester.runpytest("suites", "--preset", "smoke", "--collect-only", "-q")
    assert collected_ids(smoke) == ["flan-greedy-tokens=10", "flan-greedy-tokens=20"]


def test_each_variant_is_one_xdist_group(make_project) -> None:
    pytester = tgis_project(make_project)
    result = pytester.runpytest_subprocess("suites", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=9)
    workers: dict[str, set[str]] = {}
    for match in re.finditer(r"RAN (\S+) \S+ \S+ \S+ (gw\d)", (pytester.path / "ran.txt").read_text()):
        variant = match.group(1).rsplit("-", 2)[0] if "tokens" in match.group(1) else match.group(1).rsplit("-", 1)[0]
        workers.setdefault(variant, set()).add(match.group(2))
    assert set(workers) == {"flan-f16", "flan-f32", "granite"}
    assert all(len(used) == 1 for used in workers.values()), workers


BAD_VARIANTS = [
    ("missing-case-file",
     CONFIG.replace("cases: [cases/tgis/greedy.yaml, cases/tgis/sample.yaml]\n    settings: {model: granite",
                    "cases: [cases/tgis/nope.yaml]\n    settings: {model: granite"),
     "suites/tgis/config.yaml: variants[1].cases: case file 'cases/tgis/nope.yaml' not found"),
    ("unknown-key", CONFIG.replace("    settings: {model: flan-t5}\n", "    setings: {model: flan-t5}\n"),
     "suites/tgis/config.yaml: variants[0]: key setings: unknown key; known: alternatives, cases, name, settings, "
     "xdist_group"),
    ("duplicate-ids", CONFIG.replace("- name: granite", "- name: flan-f16"),
     "suites/tgis/config.yaml: variants: duplicate case id 'flan-f16-greedy-tokens=10'"),
    ("duplicate-names", CONFIG.replace("- name: granite", "- name: flan"),
     "suites/tgis/config.yaml: variants[1].name: 'flan' is also the name of variants[0]"),
]


@pytest.mark.parametrize(("config", "message"), [pytest.param(c, m, id=i) for i, c, m in BAD_VARIANTS])
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_bad_variants_are_one_message_naming_the_key(make_project, config: str, message: str,
                                                      xdist: list[str]) -> None:
    pytester = tgis_project(make_project, config)
    result = pytester.runpytest_subprocess("suites", "-p", "no:cacheprovider", *xdist)
    assert result.ret == 4
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
