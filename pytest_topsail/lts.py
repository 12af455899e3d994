"""Long-term-storage payload of one test: ``{metadata, results, kpis}`` (MatrixBenchmarking's layout).

Strict validation (unknown fields refused, types checked) only when the suite asks for it (``lts.strict``);
otherwise the payload is checked leniently so that investigations can still read partial data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pydantic

from pytest_topsail.redact import redact
from pytest_topsail.settings import validate

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

LTS_SCHEMA_VERSION = "1.0"


class LtsKpi(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    value: float
    unit: str
    help: str
    timestamp: float
    test_uuid: str
    higher_better: bool
    ignored_for_regression: bool = False
    labels: dict[str, str | int | float | bool | None]


class LtsMetadata(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    suite: str
    nodeid: str
    test_uuid: str
    start: float
    end: float
    settings: dict[str, Any]
    presets: list[str]
    config: dict[str, Any]
    exit_code: int
    lts_schema_version: str = LTS_SCHEMA_VERSION


class LtsPayload(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    metadata: LtsMetadata
    results: dict[str, Any]
    kpis: dict[str, LtsKpi]


KPI_FIELDS = set(LtsKpi.model_fields)
def build_payload(record: ItemRecord, *, presets: list[str], config: dict[str, Any],
                  results: dict[str, Any] | None = None, strict: bool = False) -> dict[str, Any]:
    """The LTS payload of an item record (secrets in ``config`` redacted); ``strict`` validates it."""
    kpis = record.kpis
    test_uuid = kpis[0]["test_uuid"] if kpis else record.nodeid
    payload = {
        "metadata": {
            "suite": record.suite, "nodeid": record.nodeid, "test_uuid": test_uuid,
            "start": record.start, "end": record.end,
            "settings": redact(record.settings),
            "presets": list(presets), "config": redact(config),
            "exit_code": 1 if record.outcome == "failed" else 0,
            "lts_schema_version": LTS_SCHEMA_VERSION,
        },
        "results": results or {},
        "kpis": {k["name"]: {f: k[f] for f in KPI_FIELDS if f in k} for k in kpis},
    }
    if strict:
        validate(LtsPayload, payload, f"LTS payload of {record.nodeid}", "lts.strict is set")
    return payload
