"""``python -m pytest_topsail.history``: export or import the KPI history as JSON lines (to seed or migrate).

    python -m pytest_topsail.history export --history .topsail/history.sqlite [--suite S] [-o FILE]
    python -m pytest_topsail.history import --history .topsail/history.sqlite FILE [FILE ...]

``--history opensearch`` uses the OpenSearch settings of ``--opensearch-config FILE`` (YAML: url, index_prefix, ...)
or of the ``TOPSAIL_OPENSEARCH_*`` environment variables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_topsail.config import load_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.history import export_jsonl, import_jsonl, open_history


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pytest_topsail.history", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("export", "import"):
        command = commands.add_parser(name)
        command.add_argument("--history", required=True, metavar="PATH",
                             help="SQLite history file, or 'opensearch'")
        command.add_argument("--opensearch-config", type=Path, metavar="FILE",
                             help="YAML file with the OpenSearch settings (url, index_prefix, index, secret_file, ...)")
    commands.choices["export"].add_argument("--suite", help="only the records of this suite")
    commands.choices["export"].add_argument("-o", "--output", type=Path, help="output file (default: stdout)")
    commands.choices["import"].add_argument("files", nargs="+", type=Path, metavar="FILE")
    return parser.parse_args(argv)


def opensearch_settings(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    values = load_yaml(path) or {}
    if not isinstance(values, dict):
        raise TopsailError(f"{path}: must be a mapping of OpenSearch settings")
    return values


def run(args: argparse.Namespace) -> str:
    store = open_history(args.history, opensearch_settings(args.opensearch_config))
    try:
        if args.command == "export":
            if args.output is None:
                count = export_jsonl(store, sys.stdout, args.suite)
                return f"exported {count} KPI record(s)"
            with args.output.open("w", encoding="utf-8") as out:
                count = export_jsonl(store, out, args.suite)
            return f"exported {count} KPI record(s) to {args.output}"
        missing = [str(path) for path in args.files if not path.is_file()]
        if missing:
            raise TopsailError(f"not found: {', '.join(missing)}")
        count = sum(import_jsonl(store, path) for path in args.files)
        return f"imported {count} KPI record(s) into {args.history}"
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        message = run(args)
    except TopsailError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(message, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
