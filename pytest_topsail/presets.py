"""Presets and configuration, the engine's start-up (a plugin module registered by ``pytest_topsail.plugin``): the
options and ini keys, each suite in scope loaded with its presets and ``--var`` overrides and validated before any
test runs (on the xdist controller; its workers read the same input), the artifacts root checked, and the
artifacts line of the summary.

Runs that reach no suite stay untouched: nothing here creates files or prints unless a suite is in scope.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_topsail.errors import TopsailError


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("topsail", "pytest-topsail (performance and scale suites)")
    group.addoption("--preset", action="append", dest="topsail_presets", default=[], metavar="NAME",
                    help="apply preset NAME (repeatable or comma-separated) in each collected suite that defines it; "
                         "presets live under ci_presets: in each suite's config.yaml (suites/<suite>/config.yaml), "
                         "--topsail-show-config lists them with what they run and how long they take")
    group.addoption("--var", action="append", dest="topsail_vars", default=[], metavar="KEY=VALUE",
                    help="override a configuration key after presets (VALUE parsed as YAML; repeatable)")
    group.addoption("--topsail-pr-args", dest="topsail_pr_args", default=None, metavar="FILE",
                    help="apply a PR's directives: FILE is a PR comment (/test <job> <preset>..., /var KEY: VALUE "
                         "lines) or the variable_overrides.yaml TOPSAIL's CI writes (default: "
                         "$ARTIFACT_DIR/variable_overrides.yaml if it exists, and $PR_POSITIONAL_ARG_N)")
    group.addoption("--artifacts", dest="topsail_artifacts", default=None, metavar="DIR",
                    help="artifacts root (default: $ARTIFACT_DIR, else ./artifacts/<run-id>)")
    group.addoption("--topsail-resume", dest="topsail_resume", default=None, metavar="ARTIFACTS_DIR",
                    help="continue a stopped run (SIGKILL, Ctrl-C) in its artifacts directory: same suites, presets "
                         "and --var (checked); its finished items are reused, the others run (docs/reliability.md)")
    group.addoption("--topsail-show-config", action="store_true", dest="topsail_show_config", default=False,
                    help="print the effective configuration of each collected suite, its presets and the case ids "
                         "of its items, and exit (runs nothing)")
    parser.addini("topsail_suites", "directory whose subdirectories holding a config.yaml are suites",
                  default="suites")
    parser.addini("topsail_presets", "presets applied when no --preset is given and $TOPSAIL_PRESET is not set "
                  "(comma-separated)", default="")


def usage_error(exc: TopsailError) -> pytest.UsageError:
    return pytest.UsageError(str(exc))


def pytest_configure(config: pytest.Config) -> None:
    from pytest_topsail.run import state_of
    from pytest_topsail.suites import discover_suites, load_suites_in_scope
    from pytest_topsail.xdist_role import role_of

    role = role_of(config)
    try:
        state = state_of(config)
        for name in discover_suites(state.suites_root):
            config.addinivalue_line("markers", f"{name}: items of the topsail suite {name}")
        suites = load_suites_in_scope(config)
        for suite in suites if not role.is_worker else []:  # a worker's controller checked the same input
            check_suite(config, suite)
        if suites:
            from pytest_topsail.artifacts import check_creatable

            check_creatable(state.artifacts_root, "artifacts root (--artifacts, else $ARTIFACT_DIR)")
    except TopsailError as exc:
        raise usage_error(exc) from None
    if not suites:
        return
    from pytest_topsail.xdist_hooks import keep_groups

    keep_groups(config)
    import atexit
    import gc

    # After pytest's own cleanups (its last collections that surface unraisable exceptions), the interpreter's
    # exit collections walk every object a run built (clients, figures, models): seconds of a smoke run's wall
    # time spent freeing memory the process returns anyway.
    atexit.register(gc.freeze)
    if not role.is_worker:
        from pytest_topsail.leftovers import LeftoverReport

        config.pluginmanager.register(LeftoverReport(), "topsail-leftovers")


def check_suite(config: pytest.Config, suite: Any) -> None:
    """The start-up check of one suite: its own keys and cases, then every plugin's ``pytest_topsail_check_suite``."""
    suite.validate()
    config.hook.pytest_topsail_check_suite(suite=suite)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from pytest_topsail.run import STATE_KEY

    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.in_scope or config.option.collectonly:
        return
    if state.artifacts_root.is_dir():
        terminalreporter.write_sep("-", "topsail")
        terminalreporter.write_line(f"topsail artifacts: {state.artifacts_root}")
