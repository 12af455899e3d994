"""Helpers for the engine tests: temporary projects with suites, run through pytester."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest


@pytest.fixture(autouse=True)
def _no_inherited_artifact_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARTIFACT_DIR", raising=False)


@pytest.fixture
def make_project(pytester: pytest.Pytester) -> Callable[..., pytest.Pytester]:
    """Write a project: ``files`` maps relative paths to (dedented) text; an empty pytest.ini marks the rootdir."""

    def make(files: dict[str, str]) -> pytest.Pytester:
        pytester.makeini("[pytest]\n")
        for relative, text in files.items():
            path = pytester.path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return pytester

    return make
