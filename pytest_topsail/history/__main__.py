"""``python -m pytest_topsail.history``: export or import the KPI history as JSON lines (to seed or migrate),
list the regressions waiting for an acknowledgement, acknowledge them (the change becomes the new level).

    python -m pytest_topsail.history export --history .topsail/history.sqlite [--suite S] [-o FILE]
    python -m pytest_topsail.history import --history .topsail/history.sqlite [FILE ...]
        [--from-opensearch URL INDEX] [--from-json PATH] [--suite S] [--map-label THEIRS=OURS ...]
        [--set-label NAME=VALUE ...] [--dry-run]
        (FILE: JSON lines of our export; --from-opensearch, --from-json: LTS documents, MatrixBenchmarking's and
        TOPSAIL's or ours, their settings mapped to the suite's labels; --dry-run: what would be imported)
    python -m pytest_topsail.history pending --history .topsail/history.sqlite --suite S
    python -m pytest_topsail.history ack --history .topsail/history.sqlite --suite S [--run RUN_ID]
        [--test-uuid UUID] [--kpi GLOB ...] --reason TEXT
    python -m pytest_topsail.history report --history .topsail/history.sqlite --suite S [--kpi GLOB ...]
        [-o FILE]   (an offline HTML page: each KPI's runs over time, level changes, acknowledgements)

``--history opensearch`` uses the OpenSearch settings of ``--opensearch-config FILE`` (YAML: url, index_prefix, ...)
or of the ``TOPSAIL_OPENSEARCH_*`` environment variables.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_topsail.config import load_yaml, parse_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.history import export_jsonl, open_history, read_jsonl
from pytest_topsail.history.acks import Ack, acknowledge, pending
from pytest_topsail.history.importer import (
    Imported,
    KnownLabels,
    LabelMap,
    convert,
    history_labels,
    json_documents,
    model_labels,
    opensearch_documents,
)
from pytest_topsail.kpi import load_suite_kpis


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pytest_topsail.history", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("export", "import", "pending", "ack", "report"):
        command = commands.add_parser(name)
        command.add_argument("--history", required=True, metavar="PATH",
                             help="SQLite history file, or 'opensearch'")
        command.add_argument("--opensearch-config", type=Path, metavar="FILE",
                             help="YAML file with the OpenSearch settings (url, index_prefix, index, secret_file, ...)")
    commands.choices["export"].add_argument("--suite", help="only the records of this suite")
    commands.choices["export"].add_argument("-o", "--output", type=Path, help="output file (default: stdout)")
    add_import_arguments(commands.choices["import"])
    commands.choices["pending"].add_argument("--suite", required=True, help="the suite whose regressions to list")
    report = commands.choices["report"]
    report.add_argument("--suite", required=True, help="the suite whose KPI history to draw")
    report.add_argument("--kpi", action="append", default=[], metavar="GLOB",
                        help="only these KPIs (name or glob pattern; repeatable)")
    report.add_argument("-o", "--output", type=Path, help="output file (default: history-<suite>.html)")
    ack = commands.choices["ack"]
    ack.add_argument("--suite", required=True, help="the suite whose regressions to acknowledge")
    ack.add_argument("--run", help="only the records of this run id (shown in the report and by 'pending')")
    ack.add_argument("--test-uuid", help="only the records of this test uuid")
    ack.add_argument("--kpi", action="append", default=[], metavar="GLOB",
                     help="only these KPIs (name or glob pattern; repeatable)")
    ack.add_argument("--reason", required=True, help="why the change is accepted (kept with the records)")
    return parser.parse_args(argv)


def add_import_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("files", nargs="*", type=Path, metavar="FILE", help="JSON lines of KPI records (export)")
    command.add_argument("--from-opensearch", nargs=2, metavar=("URL", "INDEX"),
                         help="LTS documents of this index (or pattern) of this OpenSearch; credentials as for "
                              "--opensearch-config / TOPSAIL_OPENSEARCH_*")
    command.add_argument("--from-json", type=Path, metavar="PATH",
                         help="LTS documents dumped as JSON: a file or a directory of *.json files")
    command.add_argument("--suite", help="the suite of the documents that name none (MatrixBenchmarking's)")
    command.add_argument("--map-label", action="append", default=[], metavar="THEIRS=OURS",
                         help="rename a label (THEIRS= drops it); repeatable")
    command.add_argument("--set-label", action="append", default=[], metavar="NAME=VALUE",
                         help="a label every imported record gets (VALUE read as YAML); repeatable")
    command.add_argument("--suites-dir", type=Path, default=Path("suites"), metavar="DIR",
                         help="where the suites are (their kpis.py Labels models check the labels when the history "
                              "holds no record of a suite; default: suites)")
    command.add_argument("--dry-run", action="store_true",
                         help="show the records per suite and KPI and the labels that did not map; store nothing")


def opensearch_settings(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    values = load_yaml(path) or {}
    if not isinstance(values, dict):
        raise TopsailError(f"{path}: must be a mapping of OpenSearch settings")
    return values


def run(args: argparse.Namespace) -> str:
    reads = args.command != "import"  # reading a file that is not there must not create it
    if reads and args.history != "opensearch" and not Path(args.history).is_file():
        raise TopsailError(f"{args.command}: KPI history {args.history} does not exist")
    records: list[dict[str, Any]] = []
    if args.command == "import":  # every file read and checked before the history is opened (or created)
        records, message = import_records(args)
        if args.dry_run:
            return message
    store = open_history(args.history, opensearch_settings(args.opensearch_config))
    try:
        if args.command == "export":
            if args.output is None:
                count = export_jsonl(store, sys.stdout, args.suite)
                return f"exported {count} KPI record(s)"
            with args.output.open("w", encoding="utf-8") as out:
                count = export_jsonl(store, out, args.suite)
            return f"exported {count} KPI record(s) to {args.output}"
        if args.command == "pending":
            return pending_text(store, args.suite)
        if args.command == "ack":
            return ack_text(store, args)
        if args.command == "report":
            return report_text(store, args)
        count = store.add(records)
        return f"{message}\nimported {count} KPI record(s) into {args.history}"
    finally:
        store.close()


def import_records(args: argparse.Namespace) -> tuple[list[dict[str, Any]], str]:
    """The records to import and what to say of them (the dry run's whole answer)."""
    if not (args.files or args.from_opensearch or args.from_json):
        raise TopsailError("import: nothing to import: give FILE (JSON lines), --from-opensearch URL INDEX or "
                           "--from-json PATH")
    missing = [str(path) for path in [*args.files, *([args.from_json] if args.from_json else [])]
               if not path.exists()]
    if missing:
        raise TopsailError(f"not found: {', '.join(missing)}")
    imported = Imported(records=[record for path in args.files for record in read_jsonl(path)])
    if args.from_opensearch or args.from_json:
        target = None if args.history != "opensearch" and not Path(args.history).is_file() else \
            open_history(args.history, opensearch_settings(args.opensearch_config))

        def known(suite: str) -> KnownLabels | None:
            found = history_labels(target.records(suite)) if target is not None else None
            kpis_file = args.suites_dir / suite / "kpis.py"
            return found or (model_labels(load_suite_kpis(kpis_file).labels_model) if kpis_file.is_file() else None)

        try:
            found = convert(documents(args), suite=args.suite, labels=label_map(args), known_labels=known)
        finally:
            if target is not None:
                target.close()
        found.records[:0] = imported.records
        imported = found
    if not imported.records:
        raise TopsailError("import: no KPI record found\n" + "\n".join(imported.summary()))
    verb = "would import" if args.dry_run else "read"
    return imported.records, f"{verb} " + "\n".join(imported.summary())


def documents(args: argparse.Namespace) -> Iterator[tuple[str, Any, str | None]]:
    from pytest_topsail.history.opensearch import OpenSearchHistory, OpenSearchSettings

    if args.from_json:
        yield from json_documents(args.from_json)
    if args.from_opensearch:
        url, index = args.from_opensearch
        source = OpenSearchHistory(OpenSearchSettings.from_settings(
            {**opensearch_settings(args.opensearch_config), "url": url}))
        try:
            yield from opensearch_documents(source, index)
        finally:
            source.close()


def label_map(args: argparse.Namespace) -> LabelMap:
    renames: dict[str, str | None] = {}
    for text in args.map_label:
        theirs, sign, ours = text.partition("=")
        if not sign or not theirs.strip():
            raise TopsailError(f"--map-label {text!r}: THEIRS=OURS expected (THEIRS= drops the label)")
        renames[theirs.strip()] = ours.strip() or None
    fixed: dict[str, Any] = {}
    for text in args.set_label:
        name, sign, value = text.partition("=")
        if not sign or not name.strip():
            raise TopsailError(f"--set-label {text!r}: NAME=VALUE expected")
        fixed[name.strip()] = parse_yaml(value) if value.strip() else None
    return LabelMap(renames=renames, fixed=fixed)


def suite_records(store: Any, suite: str, command: str) -> list[dict[str, Any]]:
    """The suite's records; a suite the history does not know is an error naming the ones it knows."""
    records: list[dict[str, Any]] = store.records(suite)
    if not records:
        known = sorted({str(r.get("suite")) for r in store.records()})
        raise TopsailError(f"{command}: the KPI history holds no record of suite {suite!r} "
                           f"(suites: {', '.join(known) or 'none'})")
    return records


def pending_text(store: Any, suite: str) -> str:
    records = [r for r in suite_records(store, suite, "pending") if pending(r)]
    for record in records:
        print(f"{record.get('run_id') or '-'}  {record['test_uuid']}  {record['name']}={record['value']:g} "
              f"{record.get('unit', '')}  {record.get('nodeid', '')}")
    return f"{len(records)} regression record(s) of suite {suite} wait for an acknowledgement"


def ack_text(store: Any, args: argparse.Namespace) -> str:
    if not args.reason.strip():
        raise TopsailError("ack: --reason is empty (say why the change is accepted)")
    records = suite_records(store, args.suite, "ack")
    for option, field in (("run", "run_id"), ("test_uuid", "test_uuid")):
        wanted = getattr(args, option)
        if wanted is not None and not any(str(r.get(field)) == wanted for r in records):
            raise TopsailError(f"ack: suite {args.suite} has no record of {option.replace('_', '-')} {wanted!r} "
                               "(python -m pytest_topsail.history pending lists them)")
    changed = acknowledge(store, args.suite, Ack(reason=args.reason.strip(), kpis=tuple(args.kpi), run=args.run,
                                                 test_uuid=args.test_uuid))
    if not changed:
        raise TopsailError(f"ack: no unacknowledged regression of suite {args.suite} matches "
                           "(python -m pytest_topsail.history pending lists them)")
    runs = sorted({str(r.get("run_id")) for r in changed})
    return f"acknowledged {len(changed)} regression record(s) of suite {args.suite} (runs: {', '.join(runs)})"


def report_text(store: Any, args: argparse.Namespace) -> str:
    from pytest_topsail.report.history_view import render_history

    records = store.records(args.suite)
    if not records:
        raise TopsailError(f"report: the history {args.history} holds no KPI record of suite {args.suite}")
    output = args.output or Path(f"history-{args.suite}.html")
    path, drawn = render_history(records, args.suite, output, kpis=args.kpi)
    if not drawn:
        raise TopsailError(f"report: no KPI of suite {args.suite} matches {', '.join(args.kpi)}")
    return f"wrote {path}: {drawn} KPI(s) of suite {args.suite} over {len(records)} stored record(s)"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        message = run(args)
    except TopsailError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # an output that cannot be written, an input that cannot be read
        print(f"error: {args.command}: {error.filename or args.history}: {error.strerror or error}", file=sys.stderr)
        return 2
    except sqlite3.Error as error:  # a file that opens as SQLite but whose pages are damaged
        print(f"error: {args.command}: KPI history {args.history} is damaged: {error}", file=sys.stderr)
        return 2
    print(message, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
