"""What the plugin's hooks do, one function per hook (plugin.py only wires them).

Runs that reach no suite stay untouched: nothing here creates files or prints unless a suite is in scope.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.run import STATE_KEY, state_of
from pytest_topsail.suites import Suite, discover_suites, load_suite, load_suites_in_scope, suite_name_of_path
from pytest_topsail.xdist_role import role_of

FROZEN_KEY = pytest.StashKey[bool]()  # the garbage collector was frozen after collection (modify_items)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("topsail", "pytest-topsail (performance and scale suites)")
    group.addoption("--preset", action="append", dest="topsail_presets", default=[], metavar="NAME",
                    help="apply preset NAME (repeatable or comma-separated) in each collected suite that defines it; "
                         "presets live under ci_presets: in each suite's config.yaml (suites/<suite>/config.yaml), "
                         "--topsail-show-config lists them with what they run and how long they take")
    group.addoption("--var", action="append", dest="topsail_vars", default=[], metavar="KEY=VALUE",
                    help="override a configuration key after presets (VALUE parsed as YAML; repeatable)")
    group.addoption("--artifacts", dest="topsail_artifacts", default=None, metavar="DIR",
                    help="artifacts root (default: $ARTIFACT_DIR, else ./artifacts/<run-id>)")
    group.addoption("--topsail-show-config", action="store_true", dest="topsail_show_config", default=False,
                    help="print the effective configuration of each collected suite, its presets and the case ids "
                         "of its items, and exit (runs nothing)")
    parser.addini("topsail_suites", "directory whose subdirectories holding a config.yaml are suites",
                  default="suites")
    parser.addini("topsail_presets", "presets applied when no --preset is given and $TOPSAIL_PRESET is not set "
                  "(comma-separated)", default="")


def usage_error(exc: TopsailError) -> pytest.UsageError:
    return pytest.UsageError(str(exc))


def show_config(config: pytest.Config) -> int | pytest.ExitCode:
    """Print each suite's effective configuration, its presets (with their descriptions) and the case ids its
    items would run with (collected as pytest would, so a suite parametrizing its own cases shows them too);
    run nothing."""
    try:
        suites = load_suites_in_scope(config)
        for suite in suites:
            suite.validate()
            config.hook.pytest_topsail_check_suite(suite=suite)
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
        out.write(dump_yaml(effective_document(suite)))
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


def effective_document(suite: Suite) -> dict[str, Any]:
    """The effective configuration as shown and written to the artifacts: secret-looking values redacted."""
    from pytest_topsail.redact import redact

    return {**redact(suite.config.as_dict()), "presets_applied": list(suite.presets_applied)}


def configure(config: pytest.Config) -> None:
    try:
        state = state_of(config)
        for name in discover_suites(state.suites_root):
            config.addinivalue_line("markers", f"{name}: items of the topsail suite {name}")
        suites = load_suites_in_scope(config)
        for suite in suites if not role_of(config).is_worker else []:  # a worker's controller checked the same input
            suite.validate()
            config.hook.pytest_topsail_check_suite(suite=suite)
        if suites:
            from pytest_topsail.artifacts import check_creatable

            check_creatable(state.artifacts_root, "artifacts root (--artifacts, else $ARTIFACT_DIR)")
    except TopsailError as exc:
        raise usage_error(exc) from None
    if suites:
        from pytest_topsail.xdist_hooks import keep_groups

        keep_groups(config)
        import atexit
        import gc

        # After pytest's own cleanups (its last collections that surface unraisable exceptions), the interpreter's
        # exit collections walk every object a run built (clients, figures, models): seconds of a smoke run's wall
        # time spent freeing memory the process returns anyway.
        atexit.register(gc.freeze)
    if suites and not role_of(config).is_worker:
        from pytest_topsail.leftovers import LeftoverReport

        config.pluginmanager.register(LeftoverReport(), "topsail-leftovers")


def generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
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
    those presets (IDE runners re-run single items by id and may have dropped ``--preset``)."""
    import dataclasses

    from pytest_topsail.suites import build_suite

    state = state_of(config)
    hints = []
    for arg in config.args:
        path, _, rest = arg.partition("::")
        if "[" not in rest or not rest.endswith("]"):
            continue
        param_id = rest[rest.index("[") + 1:-1]
        name = suite_name_of_path(config, (Path(config.invocation_params.dir) / path).resolve())
        if name is None:
            continue
        try:
            current = load_suite(config, name)
            if any(_matches_id(case.id, param_id) for case in current.cases):
                continue
            selecting = []
            for preset in current.presets_defined:
                if preset in state.presets:
                    continue
                other = build_suite(name, current.path, dataclasses.replace(state, presets=[*state.presets, preset]))
                if any(_matches_id(case.id, param_id) for case in other.cases):
                    selecting.append(preset)
        except TopsailError:
            continue
        if selecting:
            hints.append(f"hint: [{param_id}] exists in suite {name} with --preset {selecting[0]} (presets selecting "
                         f"it: {', '.join(selecting)}; TOPSAIL_PRESET={selecting[0]} or the topsail_presets ini key "
                         "also apply it)")
    return "\n".join(hints) or None


def _matches_id(case_id: str, param_id: str) -> bool:
    """A case id is the whole parameter id or its first part (other parametrizations join theirs with '-')."""
    return param_id == case_id or param_id.startswith(case_id + "-") or param_id.endswith("-" + case_id)


def modify_items(config: pytest.Config, items: list[pytest.Item]) -> None:
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


def unconfigure(config: pytest.Config) -> None:
    if config.stash.get(FROZEN_KEY, False):
        import gc

        gc.unfreeze()


@contextmanager
def item_context(item: pytest.Item) -> Iterator[None]:
    """Around one item of a suite: its directory, record, and current artifact dir / config for the whole protocol."""
    from pytest_topsail.artifacts import next_artifact_dir, using_artifact_dir
    from pytest_topsail.config import using_config
    from pytest_topsail.items import ITEM_DIR_KEY, ITEM_RECORD_KEY, new_record
    from pytest_topsail.leftovers import collecting

    name = suite_name_of_path(item.config, Path(item.path))
    if name is None:
        yield
        return
    suite = load_suite(item.config, name)
    try:
        directory: Path | None = next_artifact_dir(item.name, parent=suite_artifact_dir(item.config, suite))
    except OSError as exc:  # disk full, counter lock timeout, ...: the item still runs, without its directory
        item.warn(pytest.PytestWarning(f"topsail: cannot create the artifact directory of {item.nodeid}: {exc}"))
        directory = None
    if directory is not None:
        item.stash[ITEM_DIR_KEY] = directory
    item.stash[ITEM_RECORD_KEY] = new_record(item, suite.name, directory)
    with ExitStack() as stack:
        if directory is not None:
            stack.enter_context(using_artifact_dir(directory))
        stack.enter_context(using_config(suite.config))
        stack.enter_context(collecting(item.stash[ITEM_RECORD_KEY]))
        yield


def suite_artifact_dir(config: pytest.Config, suite: Suite) -> Path:
    """``<artifacts>/<suite>/``, with the effective ``config.yaml`` written once per process."""
    from pytest_topsail.artifacts import write_text_atomic
    from pytest_topsail.config import dump_yaml
    from pytest_topsail.run import artifacts_root

    state = state_of(config)
    directory = artifacts_root(config) / suite.name
    with state.lock:
        if suite.name not in state.written_suite_configs:
            directory.mkdir(parents=True, exist_ok=True)
            write_text_atomic(directory / "config.yaml", dump_yaml(effective_document(suite)))
            state.written_suite_configs.add(suite.name)
    return directory


def after_report(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    from pytest_topsail.items import ITEM_RECORD_KEY, finish_record, record_phase

    if call.excinfo is not None and isinstance(call.excinfo.value, TopsailError) and report.failed:
        report.longrepr = f"TopsailError: {call.excinfo.value}"
    record = item.stash.get(ITEM_RECORD_KEY, None)
    if record is None:
        return
    _redact_report(item, report)
    record_phase(record, report)
    try:
        if report.failed and record["artifact_dir"]:
            from pytest_topsail.artifacts import append_failure

            append_failure(Path(record["artifact_dir"]), f"{report.when} failed:\n{report.longreprtext}\n\n")
        if call.when == "teardown":
            finish_record(item, record)
    except OSError as exc:  # e.g. the test removed its own directory: a warning, not an INTERNALERROR
        item.warn(pytest.PytestWarning(f"topsail: cannot write the item files of {item.nodeid}: {exc}"))
    if call.when == "teardown":
        report.topsail = record  # type: ignore[attr-defined]


def _redact_report(item: pytest.Item, report: pytest.TestReport) -> None:
    """A failure message or captured output of a suite item may quote its secrets: the terminal, junit and FAILURE
    get them redacted (the values the suite's configuration and the item's case hold under secret names)."""
    from pytest_topsail.items import case_of_item
    from pytest_topsail.redact import redact_text, secret_values

    if not report.failed and not report.sections:
        return
    suite = load_suite(item.config, suite_name_of_path(item.config, Path(item.path)) or "")
    case = case_of_item(item)
    secrets = secret_values(suite.config.as_dict(resolve=False), case.settings if case else {})
    if report.failed:
        text = report.longreprtext
        redacted = redact_text(text, secrets)
        if redacted != text:
            report.longrepr = redacted
    report.sections = [(title, redact_text(content, secrets)) for title, content in report.sections]


def terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE_KEY, None)
    if state is None or not state.in_scope or config.option.collectonly:
        return
    if state.artifacts_root.is_dir():
        terminalreporter.write_sep("-", "topsail")
        terminalreporter.write_line(f"topsail artifacts: {state.artifacts_root}")
