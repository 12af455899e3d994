"""``--topsail-show-config`` (a plugin module registered by ``pytest_topsail.plugin``): each suite's effective
configuration, its presets (with their descriptions) and the case ids its items would run with, collected as pytest
would (a suite parametrizing its own cases shows them too); nothing runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_topsail.suites import Suite


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | pytest.ExitCode | None:
    if not config.getoption("topsail_show_config", False):
        return None
    return show_config(config)


def show_config(config: pytest.Config) -> int | pytest.ExitCode:
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.presets import check_suite, usage_error
    from pytest_topsail.suites import load_suites_in_scope

    try:
        suites = load_suites_in_scope(config)
        for suite in suites:
            check_suite(config, suite)
    except TopsailError as exc:
        raise usage_error(exc) from None
    if not suites:
        sys.stdout.write("no topsail suite collected\n")
        return 0
    from _pytest.main import wrap_session

    # pytest's own session header, "collected N items" and summary would only add noise to the listing
    config.option.no_header = config.option.no_summary = True
    config.option.verbose = min(config.option.verbose, -2)
    if getattr(config.option, "dist", "no") != "no":
        config.option.dist = "no"  # collected here, in this process: no xdist workers are started
    return wrap_session(config, lambda config, session: _show_collected(config, session, suites))


def _show_collected(config: pytest.Config, session: pytest.Session, suites: list[Suite]) -> int:
    from pytest_topsail.config import dump_yaml
    from pytest_topsail.items import case_of_item
    from pytest_topsail.suites import suite_of_item

    config.hook.pytest_collection(session=session)
    ids: dict[str, list[str]] = {suite.name: [] for suite in suites}
    for item in session.items:
        suite_of = suite_of_item(item)
        case = case_of_item(item)
        if suite_of is not None:
            ids.setdefault(suite_of.name, []).append(case.id if case else item.name)
    out = sys.stdout
    for suite in suites:
        out.write(f"# suite {suite.name} ({suite.config.source}); presets applied: "
                  f"{', '.join(suite.presets_applied) or 'none'}\n")
        out.write(dump_yaml(suite.effective_document()))
        out.write(_presets_comment(suite))
        out.write(_cases_comment(list(dict.fromkeys(ids.get(suite.name, [])))))
        out.write("\n")
    out.flush()
    return pytest.ExitCode.INTERRUPTED if session.testsfailed else 0


def _presets_comment(suite: Suite) -> str:
    """``# presets (suites/x/config.yaml ci_presets): smoke: <description>; dgx; ...``."""
    if not suite.presets_defined:
        return f"# presets: none defined (ci_presets in {suite.config.source})\n"
    lines = [f"# presets (ci_presets in {suite.config.source}):"]
    for name in suite.presets_defined:
        description = suite.preset_descriptions.get(name, "")
        lines.append(f"#   {name}{': ' + description if description else ''}")
    return "\n".join(lines) + "\n"


def _cases_comment(ids: list[str]) -> str:
    """``# N cases: id, id, ...``: every case id the items of the suite would run with."""
    if not ids:
        return ""
    return f"# {len(ids)} case{'s' if len(ids) != 1 else ''}: {', '.join(ids)}\n"
