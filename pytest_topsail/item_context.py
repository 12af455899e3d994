"""The per-item context (a plugin module registered by ``pytest_topsail.plugin``): around each item of a suite, its
artifact directory, its record (``pytest_topsail.items``), the suite's configuration as the current one and the
leftovers it reports; after each phase, the record updated, a failure appended to the item's ``FAILURE`` file and
the suite's secrets redacted from what the report shows; on the teardown report, the record attached for the
reporting plugin (on the controller, past the xdist boundary: the record travels in its JSON form)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:
    from pytest_topsail.suites import Suite


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    with item_context(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    after_report(item, call, report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Generator[None, Any, Any]:
    """A teardown report leaves an xdist worker with its record in JSON form (``ItemRecord.to_dict``)."""
    data = yield
    record = data.get("topsail") if isinstance(data, dict) else None
    if record is not None and hasattr(record, "to_dict"):
        data["topsail"] = record.to_dict()
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(config: pytest.Config, data: Any) -> Generator[None, Any, Any]:
    """... and reaches the controller with its typed record again."""
    report = yield
    record = getattr(report, "topsail", None)
    if isinstance(record, dict):
        from pytest_topsail.items import ItemRecord

        report.topsail = ItemRecord.from_dict(record)
    return report


@contextmanager
def item_context(item: pytest.Item) -> Iterator[None]:
    """Around one item of a suite: its directory, record, and current artifact dir / config for the whole protocol."""
    from pytest_topsail.artifacts import next_artifact_dir, using_artifact_dir
    from pytest_topsail.config import using_config
    from pytest_topsail.items import ITEM_DIR_KEY, ITEM_RECORD_KEY, new_record
    from pytest_topsail.leftovers import collecting
    from pytest_topsail.suites import suite_of_item

    suite = suite_of_item(item)
    if suite is None:
        yield
        return
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
        stack.enter_context(collecting(item.stash[ITEM_RECORD_KEY].leftovers))
        yield


def suite_artifact_dir(config: pytest.Config, suite: Suite) -> Path:
    """``<artifacts>/<suite>/``, with the effective ``config.yaml`` written once per process."""
    from pytest_topsail.artifacts import write_text_atomic
    from pytest_topsail.config import dump_yaml
    from pytest_topsail.run import artifacts_root, state_of

    state = state_of(config)
    directory = artifacts_root(config) / suite.name
    with state.lock:
        if suite.name not in state.written_suite_configs:
            directory.mkdir(parents=True, exist_ok=True)
            write_text_atomic(directory / "config.yaml", dump_yaml(suite.effective_document()))
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
        if report.failed and record.directory is not None:
            from pytest_topsail.artifacts import append_failure

            append_failure(record.directory, f"{report.when} failed:\n{report.longreprtext}\n\n")
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
    from pytest_topsail.suites import suite_of_item

    if not report.failed and not report.sections:
        return
    suite = suite_of_item(item)
    case = case_of_item(item)
    secrets = secret_values(suite.config.as_dict(resolve=False) if suite else {}, case.settings if case else {})
    if report.failed:
        text = report.longreprtext
        redacted = redact_text(text, secrets)
        if redacted != text:
            report.longrepr = redacted
    report.sections = [(title, redact_text(content, secrets)) for title, content in report.sections]
