"""A load case's settings are strict like every settings model of the project (topsail.Settings): a value of the
wrong type is refused, never converted, with the one formatter's message naming the case and the key."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.settings import LoadSettings, case_load_settings
from pytest_topsail.settings import Settings

WHERE = "suites/llm_load/config.yaml: tests.llm_load.cases[2]"


def refusal(**values: Any) -> str:
    with pytest.raises(TopsailError) as error:
        case_load_settings({"model": "m", "concurrency": 1, "requests": 4, **values}, WHERE, {})
    return str(error.value)


def test_the_string_false_is_no_boolean() -> None:
    assert refusal(streaming="false") == (
        "suites/llm_load/config.yaml: invalid load settings: key tests.llm_load.cases[2].streaming: "
        "Input should be a valid boolean (got 'false')")


def test_a_number_in_quotes_is_no_number_and_an_unknown_key_is_named() -> None:
    assert "key tests.llm_load.cases[2].concurrency: Input should be a valid integer (got '8')" in refusal(
        concurrency="8")
    assert "key tests.llm_load.cases[2].synthetic.prompts: Input should be a valid integer" in refusal(
        dataset="synthetic", synthetic={"prompts": "64", "input_tokens": 8, "output_tokens": 8})
    assert "key tests.llm_load.cases[2].streamin: unknown key; known: api, backend," in refusal(streamin=True)


def test_an_integer_where_a_float_is_expected_is_fine() -> None:
    settings = case_load_settings({"model": "m", "concurrency": 1, "duration_s": 2}, WHERE, {})
    assert settings.duration_s == 2.0 and isinstance(settings.duration_s, float)


def test_every_load_settings_model_is_a_topsail_settings() -> None:
    assert issubclass(LoadSettings, Settings) and LoadSettings.model_config["strict"]
    assert LoadSettings.model_config["frozen"]  # a case's settings are shared by its points
