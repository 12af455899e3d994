"""Shared by all tests of this project.

pytester's in-process runs drop the modules first imported during a run; extension modules (numpy) then fail to load a
second time ("cannot load module more than once per process"), and hypothesis' plugin would re-import itself at every
terminal summary. What the plugin imports lazily, only when a suite reports, is therefore imported once here.
"""

import numpy  # noqa: F401
import pytest

import pytest_topsail.kpi  # noqa: F401
import pytest_topsail.regression  # noqa: F401

pytest_plugins = ["pytester"]

try:
    import hypothesis.internal.observability  # noqa: F401
except ImportError:
    pass


def pytest_configure(config: pytest.Config) -> None:
    """``pytest tests -n N`` keeps xdist groups (``--dist loadgroup`` unless ``--dist`` is given), as a suite run does:
    a module whose tests share an expensive module-scoped fixture (a subprocess run, a simulator) is one group."""
    from pytest_topsail.session import keep_xdist_groups

    keep_xdist_groups(config)
