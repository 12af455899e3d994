"""``--topsail-resume ARTIFACTS_DIR`` (a plugin module registered by ``pytest_topsail.plugin``): a run that was
stopped (SIGKILL, a lost runner, Ctrl-C) continued in its own artifacts directory, as if it had not been interrupted.

- At start-up each suite in scope is checked against the configuration the stopped run saved
  (``<artifacts>/<suite>/config.yaml``): a difference is one usage error naming the suite and the differing keys
  and presets; a suite the stopped run had and this one has not is one too.
- An item is finished when its directory (``<artifacts>/<suite>/NNN__<name>``) holds an ``item.json`` that reads as
  an item record with an end time and a final outcome (passed, failed or skipped): the reporting writes it after the
  item's teardown, so an item killed at any point before has none (or a truncated one) and runs again, in a new
  numbered directory; its partial directory stays as it was.
- Finished items are deselected (each process collects and drops the same ones, xdist workers too) and their saved
  records reused as they are (KPIs, labels, figures, outcome): judged with the new items, in the one report and the
  one history entry of the run, under the stopped run's run id (``reported_run_id``). KPIs the stopped run already
  stored (it ended cleanly enough to write its history, e.g. on Ctrl-C) are not stored twice, nor judged against
  themselves (``pytest_topsail.report.history_index``).

Nothing of the stopped run is overwritten: new item directories get the numbers after the existing ones, the saved
``config.yaml`` is the one the check found equal, and only the session outputs (report, summary, verdicts) are
written anew for the whole run.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.suites import Suite

FINAL_OUTCOMES = ("passed", "failed", "skipped")
ITEM_FILE = "item.json"
SUITE_CONFIG_FILE = "config.yaml"


@dataclass
class SavedRun:
    """What the stopped run left in its artifacts directory: the finished items' records, by node id, and why the
    other item directories count as unfinished."""

    root: Path
    finished: dict[str, ItemRecord] = field(default_factory=dict)
    unfinished: list[str] = field(default_factory=list)  # item directories that run again, each with its reason

    @property
    def suites(self) -> list[str]:
        """The suites the stopped run started (each has its saved configuration)."""
        return sorted(path.parent.name for path in self.root.glob(f"*/{SUITE_CONFIG_FILE}"))

    def run_id(self) -> str | None:
        """The stopped run's run id, as its KPIs carry it (none without a KPI)."""
        return next((str(kpi["run_id"]) for record in self.finished.values() for kpi in record.kpis
                     if kpi.get("run_id")), None)

    def finished_record(self, item: pytest.Item) -> ItemRecord | None:
        """The saved record of `item` if it finished: saved under its node id, or under the one an xdist worker gives
        it (the ``@group`` suffix pytest-xdist appends to an item of an ``xdist_group``)."""
        return self.finished.get(item.nodeid) or self.finished.get(grouped_nodeid(item))


SAVED_RUN_KEY = pytest.StashKey[SavedRun]()


def grouped_nodeid(item: pytest.Item) -> str:
    """`item`'s node id as pytest-xdist's worker makes it with ``--dist loadgroup`` (its ``xdist_group`` names)."""
    names = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
             for mark in item.iter_markers("xdist_group")}
    return f"{item.nodeid}@{'_'.join(sorted(names))}" if names else item.nodeid


def read_saved_run(root: Path) -> SavedRun:
    """The finished and unfinished items under ``root/<suite>/NNN__<name>/`` (the latest of a node id wins)."""
    saved = SavedRun(root)
    for directory in sorted(root.glob("*/[0-9]*__*")):
        if not directory.is_dir():
            continue
        record, reason = _finished_record(directory)
        if record is None:
            saved.unfinished.append(f"{directory}: {reason}")
        else:
            saved.finished[record.nodeid] = record
    return saved


def _finished_record(directory: Path) -> tuple[ItemRecord | None, str]:
    from pytest_topsail.items import ItemRecord

    path = directory / ITEM_FILE
    if not path.is_file():
        return None, f"no {ITEM_FILE} (stopped before the item's end)"
    try:
        record = ItemRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:  # a write cut by the kill
        return None, f"{ITEM_FILE} unreadable ({type(error).__name__}: {error})"
    if record.end is None or record.outcome not in FINAL_OUTCOMES:
        return None, f"{ITEM_FILE} without an end and a final outcome"
    record.artifact_dir = str(directory)
    return record, ""


def reported_run_id(config: pytest.Config) -> str:
    """The run id the reporting gives this session's KPIs (and the history): a resumed run's own, else this
    process's. The process keeps its new run id for everything else (the run's shared directory, the ownership labels
    of what it creates on the cluster): what the stopped run left behind stays the stopped run's, to clean up."""
    from pytest_topsail.run import state_of

    saved = config.stash.get(SAVED_RUN_KEY, None)
    return (saved.run_id() if saved is not None else None) or state_of(config).run_id


# ------------------------------------------------------------ start-up


@pytest.hookimpl(tryfirst=True)  # before the engine's start-up (presets) reads the artifacts root
def pytest_configure(config: pytest.Config) -> None:
    option = config.getoption("topsail_resume", None)
    if not option:
        return
    from pytest_topsail.xdist_role import role_of

    root = (Path(config.invocation_params.dir) / option).resolve()
    if not root.is_dir():
        raise pytest.UsageError(f"--topsail-resume {option}: not a directory (the artifacts directory of the run to "
                                "resume)")
    if config.getoption("topsail_replot", None):
        raise pytest.UsageError("--topsail-resume and --topsail-replot: choose one (a replot runs no test)")
    given = config.getoption("topsail_artifacts", None)
    if given and (Path(config.invocation_params.dir) / given).resolve() != root:
        raise pytest.UsageError(f"--topsail-resume {option} writes into the run's own artifacts directory: "
                                f"--artifacts {given} names another one")
    config.option.topsail_artifacts = str(root)
    saved = read_saved_run(root)
    config.stash[SAVED_RUN_KEY] = saved
    role = role_of(config)
    if role.is_worker:
        return
    if not saved.suites:
        raise pytest.UsageError(f"--topsail-resume {option}: no suite configuration saved there "
                                f"(<suite>/{SUITE_CONFIG_FILE}): not the artifacts directory of a topsail run")
    config.pluginmanager.register(ResumeCheck(config, saved), "topsail-resume-check")
    config.pluginmanager.register(ResumedRecords(config, saved), "topsail-resume-records")


@dataclass(eq=False)
class ResumeCheck:
    """Each suite in scope against the configuration the stopped run saved (``pytest_topsail_check_suite``)."""

    config: pytest.Config
    saved: SavedRun

    def pytest_topsail_check_suite(self, suite: Suite) -> None:
        from pytest_topsail.run import state_of

        missing = [name for name in self.saved.suites if name not in state_of(self.config).in_scope]
        if missing:
            raise TopsailError(f"--topsail-resume {self.saved.root}: the run had suite(s) {', '.join(missing)}, "
                               "this one does not: resume with the same suites")
        differences = config_differences(suite, self.saved.root / suite.name / SUITE_CONFIG_FILE)
        if differences:
            raise TopsailError(f"--topsail-resume {self.saved.root}: suite {suite.name}: the configuration differs "
                               f"from the run's ({'; '.join(differences)}): resume with the same presets and --var")


def config_differences(suite: Suite, saved_path: Path) -> list[str]:
    """How the suite's effective configuration differs from the saved one: the presets, then each differing key."""
    from pytest_topsail.config import dump_yaml
    from pytest_topsail.yamlparse import parse_yaml

    if not saved_path.is_file():
        return []  # the stopped run never reached this suite: nothing of it to reuse
    try:
        saved = parse_yaml(saved_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return [f"{saved_path} unreadable ({type(error).__name__})"]
    current = parse_yaml(dump_yaml(suite.effective_document()))
    if not isinstance(saved, dict):
        return [f"{saved_path} is not a mapping"]
    differences = []
    saved_presets, current_presets = saved.pop("presets_applied", []), current.pop("presets_applied", [])
    if saved_presets != current_presets:
        differences.append(f"presets: the run applied {', '.join(saved_presets) or 'none'}, this one "
                           f"{', '.join(current_presets) or 'none'}")
    before, now = _flat(saved), _flat(current)
    for key in sorted(before.keys() | now.keys()):
        if before.get(key, "<absent>") != now.get(key, "<absent>"):
            differences.append(f"{key}: {before.get(key, '<absent>')!r} then, {now.get(key, '<absent>')!r} now")
    return differences


def _flat(document: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(document, dict) or not document:
        return {prefix: document}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


# ------------------------------------------------------------ items


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker appends "@group" to the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    saved = config.stash.get(SAVED_RUN_KEY, None)
    if saved is None:
        return
    finished = [item for item in items if saved.finished_record(item) is not None]
    if finished:
        config.hook.pytest_deselected(items=finished)
        items[:] = [item for item in items if saved.finished_record(item) is None]


@dataclass(eq=False)
class ResumedRecords:
    """Controller side: the finished items' records reused by the reporting, and what the terminal says of them."""

    config: pytest.Config
    saved: SavedRun

    def pytest_report_header(self) -> list[str]:
        return [f"topsail resume: {self.saved.root}: {len(self.saved.finished)} finished item(s) reused, not run "
                f"again; {len(self.saved.unfinished)} unfinished item directory(ies) left as they were"]

    @pytest.hookimpl(trylast=True)  # the reporting plugin is registered
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        reporting = self.config.pluginmanager.get_plugin("topsail-report-session")
        if reporting is None:
            return
        for record in self.saved.finished.values():
            reporting.items.process(record, reused=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_finish(self, session: pytest.Session) -> Generator[None, None, None]:
        yield
        reporting = self.config.pluginmanager.get_plugin("topsail-report-session")
        if reporting is not None and reporting.results.expected:
            reporting.results.expected += len(self.saved.finished)

    @pytest.hookimpl(trylast=True)  # after the reporting's own exit status
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The exit status of the whole run: a reused failure fails it, and nothing left to run is no error."""
        if session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            return
        if self.failed():
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif self.saved.finished:
            session.exitstatus = pytest.ExitCode.OK

    def failed(self) -> list[str]:
        return [nodeid for nodeid, record in self.saved.finished.items() if record.outcome == "failed"]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        failed = self.failed()
        terminalreporter.write_line(
            f"topsail resume: {len(self.saved.finished)} item(s) of the stopped run reused (deselected here, in the "
            "report and history as they finished)" + (f"; {len(failed)} of them failed: {', '.join(failed)}"
                                                       if failed else ""))
