"""The suite's catalog (the built-in one extended by ``tests.fine_tuning.catalog``) is built and validated once per
process, whoever asks for it: the suite's settings, its points' start-up check and its fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning import catalog as catalog_module
from pytest_topsail.fine_tuning.catalog import builtin_catalog

EXTRA = {"models": {"acme/tiny-1b": {"params_b": 1.1, "layers": 22, "hidden": 2048, "heads": 32}}}


def test_the_same_entries_give_the_same_catalog_whoever_names_them() -> None:
    first = builtin_catalog().extended(EXTRA, "suites/fine_tuning/config.yaml: tests.fine_tuning.catalog")
    again = builtin_catalog().extended({"models": {"acme/tiny-1b": {"heads": 32, "hidden": 2048, "layers": 22,
                                                                    "params_b": 1.1}}}, "tests.fine_tuning.catalog")
    assert again is first and first.model("acme/tiny-1b").layers == 22
    other = builtin_catalog().extended({"models": {"acme/tiny-1b": {**EXTRA["models"]["acme/tiny-1b"], "layers": 24}}},
                                       "x")
    assert other is not first and other.model("acme/tiny-1b").layers == 24
    assert builtin_catalog().extended(None, "x") is builtin_catalog()


def test_entries_are_validated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = builtin_catalog()  # the package's own catalog.yaml, read before counting
    parsed: list[str] = []
    original = catalog_module._parse

    def counting(data: Any, section: str, model: Any, source: str) -> dict[str, Any]:
        parsed.append(section)
        return original(data, section, model, source)

    monkeypatch.setattr(catalog_module, "_parse", counting)
    extra = {"datasets": {"acme-chat": {"samples": 1000, "median_tokens": 300.0}}}
    for source in ("tests.fine_tuning.catalog", "suites/fine_tuning/config.yaml: tests.fine_tuning.catalog",
                   "simulator profile plugins.fine_tuning.catalog"):
        assert builtin.extended(extra, source).dataset("acme-chat").samples == 1000
    assert parsed == ["models", "datasets", "families", "formats"]


def test_a_wrong_entry_is_refused_each_time_naming_its_source() -> None:
    wrong = {"models": {"acme/broken": {"params_b": -1, "layers": 2, "hidden": 8, "heads": 2}}}
    for source in ("a.yaml: tests.fine_tuning.catalog", "b.yaml: tests.fine_tuning.catalog"):
        with pytest.raises(TopsailError, match=f"^{source}: models.acme/broken"):
            builtin_catalog().extended(wrong, source)
