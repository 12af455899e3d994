"""Long-term-storage documents in MatrixBenchmarking's LTS shape: one document per test, ``{metadata, results, kpis}``
(plus ``regression_results`` when verdicts are known), which MatrixBenchmarking's loader and KPI model read.

- ``metadata``: ``start``/``end`` (ISO 8601), ``settings`` (the test's labels, flat), ``test_uuid``, ``exit_code``,
  ``presets``, ``config``, ``lts_schema_version``, and ``topsail``: what our history keeps that MatrixBenchmarking's
  KPI model has no field for (suite, node id, run id, git sha, scope, verdict, acknowledgement, sample size, ...);
  its model refuses unknown KPI fields, its metadata takes workload-specific ones.
- ``kpis``: KPI name -> ``{value, unit, help, @timestamp, test_uuid, lower_better, ignored_for_regression, format}``
  with every label repeated at the top of the entry (flattened).

``lts_document`` writes one from the KPI records of one test (``lts.json``, the OpenSearch history);
``records_of_document`` reads ours back exactly, our documents of before this shape, and MatrixBenchmarking's.
Strict validation (``lts.strict``) checks ``lts.json`` against ``LtsPayload``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pydantic

from pytest_topsail.kpi import flatten_labels
from pytest_topsail.redact import redact
from pytest_topsail.settings import validate

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

LTS_SCHEMA_VERSION = "2.0"  # 1.0: our own shape (labels nested, epoch timestamps, higher_better)
ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
OWN = "topsail"  # metadata.topsail: our fields MatrixBenchmarking's KPI model does not know
# the fields of a MatrixBenchmarking KPI entry; every other field of an entry is a label
KPI_FIELDS = ("value", "unit", "help", "@timestamp", "test_uuid", "lower_better", "ignored_for_regression",
              "format", "divisor", "divisor_unit")
# fields MatrixBenchmarking may add to an entry that are no label of the test
THEIR_RUN_FIELDS = ("ci_engine", "run_id", "test_path", "urls")
# what a history record says in the entry itself; the record's other fields go to metadata.topsail
IN_ENTRY = ("name", "value", "unit", "help", "higher_better", "ignored_for_regression", "format", "labels",
            "test_uuid")
Label = str | int | float | bool | None


class LtsKpi(pydantic.BaseModel):
    """A KPI entry: MatrixBenchmarking's fields, then the labels (scalars) at the top."""

    model_config = pydantic.ConfigDict(extra="allow", populate_by_name=True)
    __pydantic_extra__: dict[str, Label] = pydantic.Field(init=False)

    value: float
    unit: str
    help: str
    timestamp: datetime.datetime = pydantic.Field(alias="@timestamp")
    test_uuid: str
    lower_better: bool
    ignored_for_regression: bool
    format: str | None = None


class LtsMetadata(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")  # workload-specific fields

    start: datetime.datetime
    end: datetime.datetime
    settings: dict[str, Label]
    test_uuid: str
    exit_code: int
    presets: list[str]
    config: dict[str, Any]
    lts_schema_version: str
    topsail: dict[str, Any]


class LtsPayload(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    metadata: LtsMetadata
    results: dict[str, Any]
    kpis: dict[str, LtsKpi]
    regression_results: dict[str, Any] = {}


def iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(float(epoch), datetime.UTC).strftime(ISO_FORMAT)


def epoch(text: Any) -> float:
    """Epoch seconds of an ISO 8601 text (UTC when it names no zone) or of a number."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    moment = datetime.datetime.fromisoformat(str(text))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def kpi_entry(record: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A history record as (MatrixBenchmarking KPI entry, our fields it has no place for)."""
    labels = flatten_labels(record.get("labels") or {})
    entry: dict[str, Any] = {
        "value": record["value"], "unit": record.get("unit", ""), "help": record.get("help", ""),
        "@timestamp": iso(record["timestamp"]), "test_uuid": str(record["test_uuid"]),
        "lower_better": not record.get("higher_better", False),
        "ignored_for_regression": bool(record.get("ignored_for_regression", False)),
    }
    if record.get("format") is not None:
        entry["format"] = record["format"]
    entry.update({key: value for key, value in labels.items() if key not in KPI_FIELDS})
    own = {key: value for key, value in record.items() if key not in IN_ENTRY}
    shadowed = {key: value for key, value in labels.items() if key in KPI_FIELDS}
    if shadowed:  # a label named like an entry field
        own["shadowed_labels"] = shadowed
    absent = [key for key in IN_ENTRY if key not in record]
    if absent:  # read back exactly: fields the record did not have
        own["absent"] = absent
    return entry, own


def lts_document(records: Sequence[Mapping[str, Any]], *, test_uuid: str | None = None,
                 settings: Mapping[str, Any] | None = None, start: float | None = None, end: float | None = None,
                 exit_code: int = 0, presets: Sequence[str] | None = None, config: Mapping[str, Any] | None = None,
                 results: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The LTS document of one test from its KPI records; what is not given comes from the records (settings: the
    labels every KPI shares; start/end: the earliest/latest KPI timestamp; presets: the records')."""
    entries: dict[str, dict[str, Any]] = {}
    own: dict[str, dict[str, Any]] = {}
    for record in records:
        entries[record["name"]], own[record["name"]] = kpi_entry(record)
    shared = _shared(list(own.values()))
    timestamps = [float(record["timestamp"]) for record in records] or [0.0]
    metadata = {
        "start": iso(start if start is not None else min(timestamps)),
        "end": iso(end if end is not None else max(timestamps)),
        "settings": dict(settings) if settings is not None else _shared([
            flatten_labels(record.get("labels") or {}) for record in records]),
        "test_uuid": test_uuid or (str(records[0]["test_uuid"]) if records else ""),
        "exit_code": exit_code,
        "presets": list(presets if presets is not None else shared.get("presets") or []),
        "config": dict(config or {}),
        "lts_schema_version": LTS_SCHEMA_VERSION,
        OWN: {**shared, "kpis": {name: {k: v for k, v in fields.items() if k not in shared}
                                 for name, fields in own.items()}},
    }
    document: dict[str, Any] = {"metadata": metadata, "results": dict(results or {}), "kpis": entries}
    verdicts = {name: {"verdict": fields["verdict"], "acknowledged": bool(fields.get("acknowledged"))}
                for name, fields in own.items() if fields.get("verdict")}
    if verdicts:  # MatrixBenchmarking's place for verdicts, readable from dashboards
        document["regression_results"] = verdicts
    return document


def _shared(mappings: list[dict[str, Any]]) -> dict[str, Any]:
    """The keys every mapping has with the same value."""
    if not mappings:
        return {}
    first, *others = mappings
    return {key: value for key, value in first.items()
            if all(key in other and other[key] == value for other in others)}


def records_of_document(document: Mapping[str, Any], suite: str | None = None) -> tuple[list[dict[str, Any]],
                                                                                        list[str]]:
    """The history records of one LTS document (ours, our older shape, or MatrixBenchmarking's; ``suite`` names
    the suite of a document that does not say) and the problems of the entries that could not be read."""
    kpis = document.get("kpis")
    metadata = document.get("metadata")
    if not isinstance(kpis, Mapping) or not isinstance(metadata, Mapping):
        return [], ["not an LTS document (no metadata and kpis mappings)"]
    own = metadata.get(OWN)
    if isinstance(own, Mapping):
        return [_our_record(name, entry, own) for name, entry in kpis.items()], []
    if kpis and all(isinstance(entry, Mapping) and "timestamp" in entry and "name" in entry
                    for entry in kpis.values()):
        return [dict(entry) for entry in kpis.values()], []  # our documents of before LTS_SCHEMA_VERSION 2.0
    return _their_records(kpis, metadata, suite)


def _our_record(name: str, entry: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    fields = {**{k: v for k, v in own.items() if k != "kpis"}, **(own.get("kpis") or {}).get(name, {})}
    absent = set(fields.pop("absent", []))
    labels = {key: value for key, value in entry.items() if key not in KPI_FIELDS}
    labels.update(fields.pop("shadowed_labels", {}))
    record = {"name": name, "value": entry["value"], "unit": entry.get("unit"), "help": entry.get("help"),
              "higher_better": not entry.get("lower_better"),
              "ignored_for_regression": entry.get("ignored_for_regression"), "format": entry.get("format"),
              "labels": labels, "test_uuid": entry.get("test_uuid"), **fields}
    return {key: value for key, value in record.items() if key not in absent}


def _their_records(kpis: Mapping[str, Any], metadata: Mapping[str, Any],
                   suite: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    records, problems = [], []
    settings = flatten_labels(metadata.get("settings") or {})
    where = metadata.get("test_path") or metadata.get("test_uuid") or "?"
    for name, entry in kpis.items():
        value = entry.get("value") if isinstance(entry, Mapping) else None
        if not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(f"test {where}: KPI {name}: value {value!r} is not a number")
            continue
        labels = {key: item for key, item in entry.items() if key not in KPI_FIELDS + THEIR_RUN_FIELDS}
        try:
            timestamp = epoch(entry.get("@timestamp") or metadata["start"])
        except (KeyError, ValueError):
            problems.append(f"test {where}: KPI {name}: no readable @timestamp nor metadata.start")
            continue
        records.append({
            "name": name, "value": float(value), "unit": entry.get("unit", ""), "help": entry.get("help", ""),
            "higher_better": not entry.get("lower_better", False),
            "ignored_for_regression": bool(entry.get("ignored_for_regression", False)),
            "format": entry.get("format") or "{}", "labels": labels or settings, "timestamp": timestamp,
            "test_uuid": str(entry.get("test_uuid") or metadata.get("test_uuid") or ""),
            "suite": suite, "nodeid": str(metadata.get("test_path") or f"{suite} (imported)"),
            "test_id": str(metadata.get("test_path") or name), "scope": "item",
            "run_id": entry.get("run_id") or metadata.get("run_id"), "presets": list(metadata.get("presets") or []),
        })
    return records, problems


def build_payload(record: ItemRecord, *, presets: list[str], config: dict[str, Any],
                  results: dict[str, Any] | None = None, strict: bool = False) -> dict[str, Any]:
    """The item's ``lts.json`` (secrets in ``config`` redacted); ``strict`` validates it."""
    payload = lts_document(
        record.kpis, test_uuid=str(record.kpis[0]["test_uuid"]) if record.kpis else record.nodeid,
        settings=flatten_labels(redact(record.settings)), start=record.start,
        end=record.end if record.end is not None else record.start,
        exit_code=1 if record.outcome == "failed" else 0, presets=presets, config=redact(config), results=results)
    payload["metadata"][OWN].setdefault("suite", record.suite)
    payload["metadata"][OWN].setdefault("nodeid", record.nodeid)
    if strict:
        validate(LtsPayload, payload, f"LTS payload of {record.nodeid}", "lts.strict is set")
    return payload
