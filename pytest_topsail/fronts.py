"""Lazy public fronts: a package's ``__init__`` maps each public name to the module defining it, and the name is
imported on first use (a module ``__getattr__``, PEP 562), so importing the package costs nothing until a name is
used. ``pytest_topsail`` itself (``topsail.*``) and the domain fronts (``pytest_topsail.tgis``, ``.llmload``,
``.scale``, ``.fine_tuning``, ``.kube``) are built this way; each also imports its names under ``TYPE_CHECKING`` for
type checkers, and tests/engine/test_public_api.py checks that both lists agree.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_front(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package `package` whose public names are `exports` (name ->
    module defining it); a name once resolved is kept in the package's namespace."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
