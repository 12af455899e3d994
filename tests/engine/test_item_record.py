"""The typed item record: its JSON form (item.json, the xdist wire) round-trips; saved records of every version up to
the current one load, records without a version (saved before it existed) included; what does not fit is named."""

from __future__ import annotations

import json

import pytest

from pytest_topsail.items import RECORD_VERSION, CaseRecord, ItemRecord

KPI = {"name": "tps", "value": 12.5, "unit": "tokens/s", "labels": {"gpus": 8}}


def test_the_json_form_round_trips() -> None:
    record = ItemRecord(suite="s", nodeid="suites/s/test_s.py::t[a]", test_id="t[a]", artifact_dir="/a/001__t[a]",
                        case=CaseRecord(name="a", id="a", settings={"gpus": 8}), outcome="failed", start=1.0,
                        end=2.0, kpis=[KPI], figures=[{"title": "f", "path": "/a/f.json"}], labels={"cluster": "sim"},
                        leftovers=[{"what": "namespace x", "command": "kubectl delete namespace x"}],
                        warnings=["saturated"], machine_load=1.5)
    data = json.loads(json.dumps(record.to_dict()))
    assert data["version"] == RECORD_VERSION
    assert ItemRecord.from_dict(data) == record


def test_a_record_saved_before_the_version_field_loads() -> None:
    saved = {"suite": "s", "nodeid": "n", "test_id": "t", "artifact_dir": None, "case": None, "outcome": "passed",
             "start": 1.0, "end": None, "kpis": [KPI], "figures": [], "labels": {}, "retired_key": 1}
    record = ItemRecord.from_dict(saved)
    assert (record.version, record.kpis, record.case, record.end, record.settings) == (0, [KPI], None, None, {})


@pytest.mark.parametrize(("data", "message"), [
    ({"suite": "s", "nodeid": "n", "version": RECORD_VERSION + 1}, "reads item records up to version"),
    ({"suite": "s"}, "suite and nodeid strings expected"),
    ({"suite": "s", "nodeid": "n", "kpis": [{"name": "tps", "value": "fast"}]}, "kpis: a list of KPI records"),
    ({"suite": "s", "nodeid": "n", "labels": ["a"]}, "labels: a dict expected, got list"),
    (["not", "a", "record"], "a mapping expected, got list"),
])
def test_what_does_not_fit_is_named(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ItemRecord.from_dict(data)
