"""Importing history kept elsewhere: LTS documents (MatrixBenchmarking's and TOPSAIL's, or ours) from an OpenSearch
index or a JSON dump become history records, their settings mapped to the suite's labels, so that the first run here
already has baselines.

Labels: ``renames`` (their name -> ours, or None to drop one) then ``fixed`` labels given to every record. Then the
labels are checked against what the suite is known to have (``KnownLabels``): when the history already holds records
of the suite, a label it does not know is dropped (it would keep the records from matching) and the labels it has
that the imported records lack are reported; when it holds none, the suite's ``Labels`` model (its ``kpis.py``)
names the labels it declares: the others are reported, and kept. Either way a text value of a label known as a
number or a boolean is converted (``"8"`` -> 8).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.jsonl import read_json_lines
from pytest_topsail.lts import records_of_document

Document = tuple[str, Any, str | None]  # (where it came from, the document, its index when read from OpenSearch)


@dataclass(frozen=True)
class LabelMap:
    renames: Mapping[str, str | None] = field(default_factory=dict)  # their label -> ours (None: dropped)
    fixed: Mapping[str, Any] = field(default_factory=dict)  # labels every imported record gets

    def apply(self, labels: Mapping[str, Any]) -> dict[str, Any]:
        mapped: dict[str, Any] = {}
        for name, value in labels.items():
            ours = self.renames.get(name, name)
            if ours:
                mapped[ours] = value
        return {**mapped, **self.fixed}


@dataclass(frozen=True)
class KnownLabels:
    """What the suite is known to label its KPIs with: name -> an example value (its type)."""

    examples: Mapping[str, Any]
    exact: bool  # from the history's records (every label); else from the suite's Labels model (declared ones)


@dataclass
class Imported:
    """What an import reads: the records, and what a dry run shows of them."""

    records: list[dict[str, Any]] = field(default_factory=list)
    documents: int = 0
    problems: list[str] = field(default_factory=list)
    unmapped: dict[str, set[str]] = field(default_factory=dict)  # suite -> labels the history does not know
    undeclared: dict[str, set[str]] = field(default_factory=dict)  # suite -> labels its Labels model does not declare
    lacking: dict[str, set[str]] = field(default_factory=dict)  # suite -> labels of the history the records lack
    unchecked: set[str] = field(default_factory=set)  # suites known by neither: labels not checked
    labels: dict[str, set[str]] = field(default_factory=dict)  # suite -> the labels of its imported records

    def counts(self) -> Counter[tuple[str, str]]:
        return Counter((str(record["suite"]), str(record["name"])) for record in self.records)

    def summary(self) -> list[str]:
        source = f" from {self.documents} document(s)" if self.documents else ""
        lines = [f"{len(self.records)} KPI record(s){source}"]
        by_suite: dict[str, list[str]] = {}
        for (suite, name), count in sorted(self.counts().items()):
            by_suite.setdefault(suite, []).append(f"{name} {count}")
        lines += [f"  suite {suite}: {', '.join(kpis)}" for suite, kpis in by_suite.items()]
        for suite, labels in sorted(self.unmapped.items()):
            lines.append(f"  suite {suite}: labels not mapped (dropped; the history does not know them): "
                         f"{', '.join(sorted(labels))} (--map-label THEIRS=OURS)")
        for suite, labels in sorted(self.lacking.items()):
            lines.append(f"  suite {suite}: labels of the history the imported records lack (they will not match "
                         f"its records): {', '.join(sorted(labels))} (--map-label or --set-label NAME=VALUE)")
        for suite, labels in sorted(self.undeclared.items()):
            lines.append(f"  suite {suite}: labels its Labels model does not declare (kept; the history holds no "
                         f"record of the suite to check them against): {', '.join(sorted(labels))}")
        for suite in sorted(self.unchecked):
            lines.append(f"  suite {suite}: neither the history nor a Labels model knows it: labels not checked "
                         f"({', '.join(sorted(self.labels.get(suite, ())))})")
        lines += [f"  skipped: {problem}" for problem in self.problems]
        return lines


def json_documents(path: Path) -> Iterator[Document]:
    """The documents of a JSON dump: a file or a directory of ``*.json`` files (MatrixBenchmarking's download
    writes one per document), each a document, a list of them, a search answer (``hits.hits[]._source``) or JSON
    lines of those."""
    files = sorted(path.rglob("*.json")) if path.is_dir() else [path]
    if not files:
        raise TopsailError(f"{path}: no *.json file in it")
    for file in files:
        try:
            content = [json.loads(file.read_text(encoding="utf-8"))]
        except json.JSONDecodeError:
            content = [value for _, value in read_json_lines(file)]
        except (OSError, UnicodeDecodeError) as error:
            raise TopsailError(f"{file}: cannot be read: {error}") from None
        for value in content:
            yield from _unwrap(str(file), value)


def _unwrap(where: str, value: Any) -> Iterator[Document]:
    if isinstance(value, list):
        for number, item in enumerate(value, start=1):
            yield from _unwrap(f"{where}[{number}]", item)
    elif isinstance(value, dict) and isinstance(value.get("hits"), dict):
        yield from _unwrap(where, value["hits"].get("hits") or [])
    elif isinstance(value, dict) and isinstance(value.get("_source"), dict):
        yield f"{where} {value.get('_id', '')}".strip(), value["_source"], value.get("_index")
    else:
        yield where, value, None


def opensearch_documents(store: Any, index: str) -> Iterator[Document]:
    """The documents of an index (or index pattern) of an OpenSearch history store."""
    for hit in store.search(index):
        yield f"{hit.get('_index')}/{hit.get('_id')}", hit.get("_source"), hit.get("_index")


def convert(documents: Iterable[Document], *, suite: str | None, labels: LabelMap,
            known_labels: Callable[[str], KnownLabels | None]) -> Imported:
    """The history records of the documents; ``suite`` for the documents that name none; ``known_labels(suite)``:
    what the suite is known to label its KPIs with (None: nothing known)."""
    imported = Imported()
    known: dict[str, KnownLabels | None] = {}
    for where, document, _index in documents:
        imported.documents += 1
        if not isinstance(document, dict):
            imported.problems.append(f"{where}: not a JSON object")
            continue
        records, problems = records_of_document(document, suite)
        imported.problems += [f"{where}: {problem}" for problem in problems]
        for record in records:
            if not record.get("suite"):
                raise TopsailError(f"{where}: the document names no suite: give --suite")
            name = str(record["suite"])
            if name not in known:
                known[name] = known_labels(name)
            record["labels"] = _checked(labels.apply(record.get("labels") or {}), known[name], name, imported)
            imported.labels.setdefault(name, set()).update(record["labels"])
            imported.records.append(record)
    return imported


def _checked(labels: dict[str, Any], known: KnownLabels | None, suite: str, imported: Imported) -> dict[str, Any]:
    if known is None:
        imported.unchecked.add(suite)
        return labels
    examples = known.examples
    unknown = set(labels) - set(examples)
    if unknown:
        (imported.unmapped if known.exact else imported.undeclared).setdefault(suite, set()).update(unknown)
    lacking = set(examples) - set(labels)
    if lacking and known.exact:
        imported.lacking.setdefault(suite, set()).update(lacking)
    return {name: _like(value, examples.get(name)) for name, value in labels.items()
            if name in examples or not known.exact}


def _like(value: Any, example: Any) -> Any:
    """A text value as the type the history holds the label in (``"8"`` -> 8), when it reads as one."""
    if not isinstance(value, str) or isinstance(example, str) or example is None:
        return value
    if isinstance(example, bool):
        return {"true": True, "false": False}.get(value.lower(), value)
    for kind in (int, float):
        if isinstance(example, kind):
            try:
                return kind(value)
            except ValueError:
                return value
    return value


def history_labels(records: Iterable[Mapping[str, Any]]) -> KnownLabels | None:
    """The labels of a suite's history records (None: no record)."""
    found: dict[str, Any] = {}
    for record in records:
        for name, value in (record.get("labels") or {}).items():
            if found.get(name) is None:
                found[name] = value
    return KnownLabels(found, exact=True) if found else None


def model_labels(model: Any) -> KnownLabels | None:
    """The labels a suite's ``Labels`` model declares, each with an example of its type."""
    if model is None:
        return None
    examples = {bool: False, int: 0, float: 0.0}
    return KnownLabels({name: examples.get(info.annotation, "")
                        for name, info in model.model_fields.items()}, exact=False)
