"""A suite's items seen as a matrix: the dimensions that vary (from the case settings), the labels every item
shares (shown once, without the same fact under two names), each item's name by its dimensions, and the suite's
headline KPIs.

- dimensions: a suite's ``report.dimensions`` when given; else the case name (when it varies), the keys the case
  ids name (``method=full``), then other varying settings with short values, shallowest first, until the
  dimensions tell every item apart; a key whose value follows from the dimensions already chosen is left out;
- headline KPIs: a suite's ``report.headline_kpis`` when given, else its first judged KPIs in declaration order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

MAX_DIMENSIONS = 5
MAX_HEADLINE = 6
MAX_VALUE = 40  # a longer value (a prompt, an expected answer) is no dimension
NAME = "case"  # the dimension of the case name


@dataclass
class Matrix:
    dimensions: list[str]
    constant: dict[str, str]  # labels with one value across the suite, deduplicated
    headline: list[str]  # KPI names
    names: dict[str, str] = field(default_factory=dict)  # nodeid -> name by dimensions
    cells: dict[str, dict[str, str]] = field(default_factory=dict)  # nodeid -> dimension -> value
    varying: dict[str, dict[str, str]] = field(default_factory=dict)  # nodeid -> its other varying labels


def text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def settings_of(record: ItemRecord) -> dict[str, Any]:
    from pytest_topsail.kpi import flatten_labels

    name = record.case.name if record.case is not None else ""
    return {NAME: name or record.test_id or record.nodeid, **flatten_labels(record.settings)}


def labels_of(record: ItemRecord) -> dict[str, Any]:
    """Every label of an item: its KPIs' labels (case settings, suite labels, cluster facts) merged."""
    from pytest_topsail.kpi import flatten_labels

    labels = flatten_labels(record.labels)
    for kpi in record.kpis:
        labels.update(kpi.get("labels") or {})
    return labels


def id_keys(records: Iterable[ItemRecord]) -> list[str]:
    """Keys named in the case ids as ``key=value``, in order of first appearance."""
    keys: dict[str, None] = {}
    for record in records:
        case_id = record.case.id if record.case is not None else ""
        keys.update(dict.fromkeys(re.findall(r"(?:^|-)([A-Za-z_][\w.]*)=", case_id)))
    return list(keys)


def _distinct(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> int:
    return len({tuple(text(row.get(k)) for k in keys) for row in rows})


def _short(rows: Sequence[Mapping[str, Any]], key: str) -> bool:
    return all(len(text(row.get(key))) <= MAX_VALUE for row in rows)


def choose_dimensions(rows: Sequence[Mapping[str, Any]], hinted: Sequence[str]) -> list[str]:
    varying = [k for k in dict.fromkeys(k for row in rows for k in row) if _distinct(rows, [k]) > 1]
    order = ([NAME] if NAME in varying else []) + [k for k in hinted if k in varying and k != NAME]
    order += sorted((k for k in varying if k not in order), key=lambda k: k.count("."))
    chosen: list[str] = []
    for key in order:
        if len(chosen) >= MAX_DIMENSIONS or (chosen and _distinct(rows, chosen) == len(rows)):
            break
        if not _short(rows, key):
            continue
        if chosen and _distinct(rows, [*chosen, key]) == _distinct(rows, chosen) and key not in hinted:
            continue  # follows from the dimensions already chosen
        chosen.append(key)
    return chosen


def _tokens(key: str) -> frozenset[str]:
    return frozenset(t for t in re.split(r"[._]", key) if t and t != "train")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | str):
        return float(a) == float(b)
    return text(a) == text(b)


def deduplicated(labels: Mapping[str, Any]) -> dict[str, Any]:
    """One name per fact: of two keys with the same value where one's words are among the other's
    (``dataset.name`` / ``dataset_name``, ``model`` / ``model_name``, ``method`` / ``tuning_method``,
    ``per_device_batch_size`` / ``per_device_train_batch_size``), the shorter is kept."""
    kept: dict[str, Any] = {}
    for key in sorted(labels, key=lambda k: (len(k), k)):
        tokens = _tokens(key)
        if any(_same(labels[key], value) and (_tokens(other) <= tokens or tokens <= _tokens(other))
               for other, value in kept.items()):
            continue
        kept[key] = labels[key]
    return dict(sorted(kept.items()))


def headline_kpis(records: Sequence[ItemRecord], wanted: Sequence[str] | None,
                  problems: list[str], suite: str) -> list[str]:
    declared = list(dict.fromkeys(k["name"] for r in records for k in r.kpis))
    if wanted:
        unknown = [name for name in wanted if name not in declared]
        if unknown:
            problems.append(f"suite {suite}: report.headline_kpis: no KPI named {', '.join(unknown)} "
                            f"(recorded: {', '.join(declared[:12])}{', ...' if len(declared) > 12 else ''})")
        return [name for name in wanted if name in declared]
    ignored = {k["name"] for r in records for k in r.kpis if k.get("ignored_for_regression")}
    return [name for name in declared if name not in ignored][:MAX_HEADLINE]


def build_matrix(suite: str, records: Sequence[ItemRecord], settings: Mapping[str, Any],
                 problems: list[str]) -> Matrix:
    rows = [settings_of(r) for r in records]
    wanted = settings.get("dimensions")
    if wanted:
        dimensions = [d for d in wanted if any(d in row for row in rows)]
    else:
        dimensions = choose_dimensions(rows, id_keys(records)) if len(rows) > 1 else []
    if not dimensions:
        dimensions = [NAME]
    labels = [{**labels_of(r), **{k: v for k, v in row.items() if k != NAME}} for r, row in zip(records, rows,
                                                                                                  strict=True)]
    shared = {k: v for k, v in labels[0].items() if all(_same(other.get(k, object()), v) for other in labels)} \
        if labels else {}
    matrix = Matrix(dimensions=dimensions, constant={k: text(v) for k, v in deduplicated(shared).items()},
                    headline=headline_kpis(records, settings.get("headline_kpis"), problems, suite))
    for record, row, item_labels in zip(records, rows, labels, strict=True):
        cells = {d: text(row[d]) if d in row else text(item_labels[d]) if d in item_labels else ""
                 for d in dimensions}
        matrix.cells[record.nodeid] = cells
        matrix.names[record.nodeid] = display_name(cells)
        own = deduplicated({**{k: v for k, v in item_labels.items() if k not in shared}, **row_dims(row, dimensions)})
        matrix.varying[record.nodeid] = {k: text(v) for k, v in own.items() if k not in dimensions}
    return matrix


def row_dims(row: Mapping[str, Any], dimensions: Sequence[str]) -> dict[str, Any]:
    return {d: row[d] for d in dimensions if d in row}


def display_name(cells: Mapping[str, str]) -> str:
    """``santacoder method=full gpus_per_pod=1``: the case name, then ``key=value`` of the other dimensions that
    the item has."""
    parts = [value if key == NAME else f"{key}={value}" for key, value in cells.items() if value != ""]
    return " ".join(parts)
