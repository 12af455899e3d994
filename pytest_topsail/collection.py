"""Cases and items (a plugin module registered by ``pytest_topsail.plugin``): a suite test's ``case`` parametrized
from the suite's cases, each suite's marker on its test modules, a hint naming the preset when a node id of the
command line exists only under a preset not applied (IDE runners re-run single items by id and may drop
``--preset``), and the garbage collector frozen from the end of collection to the end of the run."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError

FROZEN_KEY = pytest.StashKey[bool]()  # the garbage collector was frozen after collection


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    try:
        return (yield)
    except pytest.UsageError as exc:  # "not found: suites/x/test_x.py::test[id]": an id only a preset selects?
        hint = preset_hint(session.config)
        if hint is None:
            raise
        raise pytest.UsageError(*exc.args, hint) from None


@pytest.hookimpl(trylast=True)  # after the suites' own pytest_generate_tests, which may parametrize "case" themselves
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    from pytest_topsail.suites import load_suite, suite_name_of_path

    config = metafunc.config
    name = suite_name_of_path(config, Path(metafunc.definition.path))
    if name is None or _parametrized_explicitly(metafunc, "case"):
        return
    try:
        suite = load_suite(config, name)
        if not suite.has_cases:
            return
        params = suite.case_params
    except TopsailError as exc:
        error = str(exc)
    else:
        metafunc.parametrize("case", params)
        return
    # A collection error of this module: one message, no traceback, and xdist workers report it like any other
    # (a UsageError raised while a worker collects would crash it).
    pytest.fail(error, pytrace=False)


def _parametrized_explicitly(metafunc: pytest.Metafunc, argname: str) -> bool:
    """True when a parametrize mark or a suite's own pytest_generate_tests (run before ours, with
    ``cases.parametrize_cases``) already covers it."""
    from pytest_topsail.cases import PARAMETRIZED_KEY

    if argname in metafunc.definition.stash.get(PARAMETRIZED_KEY, ()):
        return True
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [part.strip() for part in names.split(",")]
        if argname in names:
            return True
    return False


def preset_hint(config: pytest.Config) -> str | None:
    """For node ids of the command line whose parameter id exists only under presets not applied: a hint naming
    those presets."""
    from pytest_topsail.suites import suite_name_of_path

    hints = []
    for arg in config.args:
        path, _, rest = arg.partition("::")
        if "[" not in rest or not rest.endswith("]"):
            continue
        param_id = rest[rest.index("[") + 1:-1]
        name = suite_name_of_path(config, (Path(config.invocation_params.dir) / path).resolve())
        if name is None:
            continue
        selecting = _presets_selecting(config, name, param_id)
        if selecting:
            hints.append(f"hint: [{param_id}] exists in suite {name} with --preset {selecting[0]} (presets selecting "
                         f"it: {', '.join(selecting)}; TOPSAIL_PRESET={selecting[0]} or the topsail_presets ini key "
                         "also apply it)")
    return "\n".join(hints) or None


def _presets_selecting(config: pytest.Config, name: str, param_id: str) -> list[str]:
    """The presets of suite `name`, not applied, under which a case has the parameter id `param_id` (none when a
    case has it already)."""
    import dataclasses

    from pytest_topsail.run import state_of
    from pytest_topsail.suites import build_suite, load_suite

    state = state_of(config)
    try:
        current = load_suite(config, name)
        if any(_matches_id(case.id, param_id) for case in current.cases):
            return []
        selecting = []
        for preset in current.presets_defined:
            if preset in state.presets:
                continue
            other = build_suite(name, current.path, dataclasses.replace(state, presets=[*state.presets, preset]))
            if any(_matches_id(case.id, param_id) for case in other.cases):
                selecting.append(preset)
    except TopsailError:
        return []
    return selecting


def _matches_id(case_id: str, param_id: str) -> bool:
    """A case id is the whole parameter id or its first part (other parametrizations join theirs with '-')."""
    return param_id == case_id or param_id.startswith(case_id + "-") or param_id.endswith("-" + case_id)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from pytest_topsail.run import STATE_KEY
    from pytest_topsail.suites import suite_name_of_path

    if config.stash.get(STATE_KEY, None) is None:
        return
    # The suite marker goes on each test module once (items inherit it: -m, -k, get_closest_marker): cheaper than
    # 10,000 item markers.
    marked: set[int] = set()
    last_parent: Any = None  # items of one function share their parent (module or class): looked at once
    for item in items:
        if item.parent is last_parent and last_parent is not None:
            continue
        last_parent = item.parent
        name = suite_name_of_path(config, item.path)
        if name is None:
            continue
        holder = item.getparent(pytest.Module) or item
        if id(holder) not in marked:
            marked.add(id(holder))
            holder.add_marker(name)
    if marked:
        import gc

        # What exists now (the imported clients, servers, plotly, pydantic models, the items) lives until the end:
        # the collector's full passes during the items need not walk it again each time (unfrozen at unconfigure,
        # before pytest's last collections).
        gc.freeze()
        config.stash[FROZEN_KEY] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(FROZEN_KEY, False):
        import gc

        gc.unfreeze()
