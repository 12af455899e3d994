"""Case files and matrix expansion (MatrixBenchmarking semantics): dimensions, raw_lists, extra_settings, skip_if."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_topsail.cases import case_params, expand_case, expand_matrix, load_cases
from pytest_topsail.errors import TopsailError


def ids(entry: dict) -> list[str]:
    return [case.id for case in expand_case(entry, "f.yaml[0]")]


def test_lists_are_dimensions_in_file_order() -> None:
    cases = expand_case({"name": "training", "jobs": [20, 50], "qps": [1, 2], "gpus": 1}, "f.yaml[0]")
    assert [case.id for case in cases] == [
        "training-jobs=20-qps=1", "training-jobs=20-qps=2", "training-jobs=50-qps=1", "training-jobs=50-qps=2"]
    assert cases[1].settings == {"jobs": 20, "qps": 2, "gpus": 1}
    assert all(case.name == "training" for case in cases)


def test_single_combination_id_is_the_name() -> None:
    assert ids({"name": "interactive", "gpus": 1}) == ["interactive"]


def test_raw_lists_stay_values() -> None:
    cases = expand_case({"name": "t", "args": ["--a", "--b"], "jobs": [1, 2], "raw_lists": ["args"]}, "f")
    assert [case.settings["args"] for case in cases] == [["--a", "--b"], ["--a", "--b"]]
    assert [case.id for case in cases] == ["t-jobs=1", "t-jobs=2"]


def test_nested_dimensions_use_dotted_keys() -> None:
    cases = expand_case({"name": "ft", "hyper": {"r": [4, 8], "alpha": 16}}, "f")
    assert [case.id for case in cases] == ["ft-hyper.r=4", "ft-hyper.r=8"]
    assert cases[0].settings == {"hyper": {"r": 4, "alpha": 16}}


def test_extra_settings_deep_merge_alternatives() -> None:
    entry = {"name": "ft", "model": "llama", "hyper": {"r": 4, "alpha": 16},
             "extra_settings": [{"hyper": {"r": 8}}, {"model": "granite", "gpus": [1, 2]}]}
    cases = expand_case(entry, "f")
    assert [case.settings for case in cases] == [
        {"model": "llama", "hyper": {"r": 8, "alpha": 16}},
        {"model": "granite", "hyper": {"r": 4, "alpha": 16}, "gpus": 1},
        {"model": "granite", "hyper": {"r": 4, "alpha": 16}, "gpus": 2},
    ]
    assert [case.id for case in cases] == [
        "ft-model=llama-hyper.r=8-gpus=null", "ft-model=granite-hyper.r=4-gpus=1", "ft-model=granite-hyper.r=4-gpus=2"]


def test_skip_if_drops_matching_combinations() -> None:
    entry = {"name": "s", "jobs": [1, 2], "qps": [1, 5], "skip_if": [{"jobs": 2, "qps": 5}, {"jobs": 1, "qps": [5]}]}
    assert ids(entry) == ["s-jobs=1-qps=1", "s-jobs=2-qps=1"]  # ids keep naming qps: stable when skips change


def test_skip_if_unknown_key_is_an_error() -> None:
    with pytest.raises(TopsailError, match=r"f.yaml\[0\] \(case 's'\): skip_if uses unknown key 'job'"):
        ids({"name": "s", "jobs": [1, 2], "skip_if": {"job": 2}})


def test_expand_matrix_is_public_for_custom_parametrization() -> None:
    combos = expand_matrix({"model": ["a", "b"], "users": [1, 2]}, skip_if={"model": "b", "users": 2})
    assert combos == [{"model": "a", "users": 1}, {"model": "a", "users": 2}, {"model": "b", "users": 1}]


def test_case_without_name_and_not_a_mapping() -> None:
    with pytest.raises(TopsailError, match=r"f.yaml\[0\]: case without a 'name'"):
        expand_case({"jobs": 1}, "f.yaml[0]")
    with pytest.raises(TopsailError, match=r"f.yaml\[0\]: a case must be a mapping"):
        expand_case(["x"], "f.yaml[0]")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_load_cases_globs_sorted_and_duplicates(tmp_path: Path) -> None:
    write(tmp_path / "cases/b.yaml", "- name: b1\n")
    write(tmp_path / "cases/a.yaml", "- name: a1\n  n: [1, 2]\n")
    assert [case.id for case in load_cases(["cases/*.yaml"], tmp_path)] == ["a1-n=1", "a1-n=2", "b1"]
    write(tmp_path / "cases/c.yaml", "- name: b1\n")
    with pytest.raises(TopsailError, match=r"duplicate case id 'b1': cases/b.yaml\[0\] and cases/c.yaml\[0\]"):
        load_cases(["cases/*.yaml"], tmp_path)


def test_load_cases_missing_and_not_a_list(tmp_path: Path) -> None:
    with pytest.raises(TopsailError, match="case file 'cases/none.yaml' not found"):
        load_cases(["cases/none.yaml"], tmp_path)
    with pytest.raises(TopsailError, match=r"case glob 'cases/\*.yml' matches no file"):
        load_cases(["cases/*.yml"], tmp_path)
    write(tmp_path / "cases/map.yaml", "name: x\n")
    with pytest.raises(TopsailError, match="cases/map.yaml: a case file must be a YAML list"):
        load_cases(["cases/map.yaml"], tmp_path)


def test_case_params_carry_ids_marks_and_xdist_group() -> None:
    cases = expand_case({"name": "m", "marks": ["xfail"], "xdist_group": "model-a", "x": 1}, "f")
    (param,) = case_params(cases)
    assert param.id == "m"
    assert {mark.name for mark in param.marks} == {"xfail", "xdist_group"}
    assert param.values[0].settings == {"x": 1}


def test_long_or_multiline_values_are_cut_in_ids_but_stay_unique() -> None:
    first = "Once upon a time, in a data center far away, " * 3
    second = first + "the end."
    cases = expand_case({"name": "gen", "prompt": [first, second, "two\nlines", "short"]}, "f")
    ids = [case.id for case in cases]
    assert len(set(ids)) == 4 and all(len(case_id) <= len("gen-prompt=") + 40 for case_id in ids)
    assert ids[0].startswith("gen-prompt=Once upon a time, in a data ") and "~" in ids[0]
    assert ids[2].startswith("gen-prompt=two lines~") and "\n" not in ids[2]
    assert ids[3] == "gen-prompt=short"
    assert cases[0].settings["prompt"] == first  # the settings keep the whole value
    assert [case.id for case in expand_case({"name": "gen", "prompt": [first, second, "two\nlines", "short"]},
                                            "f")] == ids  # stable
