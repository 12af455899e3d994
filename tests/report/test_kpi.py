"""KPI declaration, the recorder, labels, OpenMetrics text and the LTS payload as functions."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.items import CaseRecord, ItemRecord
from pytest_topsail.kpi import KpiRecorder, SuiteKpis, flatten_labels, kpi, load_suite_kpis
from pytest_topsail.lts import build_payload
from pytest_topsail.report.openmetrics import render


def test_a_kpi_needs_exactly_one_direction() -> None:
    with pytest.raises(TopsailError, match="exactly one of higher_better=True or lower_better=True"):
        kpi(unit="s", help="h")
    with pytest.raises(TopsailError, match="exactly one of"):
        kpi(unit="s", help="h", higher_better=True, lower_better=True)


def test_kpis_py_is_loaded_by_path_with_its_labels_model(tmp_path: Path) -> None:
    path = tmp_path / "kpis.py"
    path.write_text("import pydantic\nfrom pytest_topsail.kpi import kpi\n\n"
                    "class Labels(pydantic.BaseModel):\n    gpus: int\n\n"
                    "@kpi(unit='s', help='Runtime', lower_better=True, format='{:.2f}')\n"
                    "def train_runtime(r):\n    return r['runtime']\n\n"
                    "def helper():\n    pass\n")
    suite = load_suite_kpis(path)
    assert list(suite.specs) == ["train_runtime"]
    spec = suite.specs["train_runtime"]
    assert (spec.unit, spec.higher_better, spec.render(3.14159)) == ("s", False, "3.14")
    assert suite.labels_model is not None and suite.labels_model.__name__ == "Labels"
    assert load_suite_kpis(tmp_path / "missing.py").specs == {}


@pytest.mark.parametrize(("text", "message"), [
    ("def broken(:\n", r"kpis.py: failed to load: SyntaxError"),
    ("from pytest_topsail.kpi import kpi\n@kpi(unit='s', help='h')\ndef x(r):\n    return 1\n",
     r"kpis.py: KPI declared with unit 's': give exactly one of"),
    ("Labels = dict\n", r"kpis.py: Labels must be a pydantic BaseModel subclass"),
])
def test_a_broken_kpis_py_is_named_in_the_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "kpis.py"
    path.write_text(text)
    with pytest.raises(TopsailError, match=message):
        load_suite_kpis(path)


class Labels(pydantic.BaseModel):
    gpus: int


@kpi(unit="tokens/s", help="Throughput", higher_better=True)
def tps(results: dict) -> float:
    return results["tps"]


def recorder(**record: object) -> KpiRecorder:
    base = {"suite": "ft", "nodeid": "suites/ft/test_ft.py::t[a]", "test_id": "t[a]", "artifact_dir": None,
            "case": {"name": "a", "id": "a", "settings": {"gpus": "8", "hyper": {"r": 4, "modules": ["q", "v"]}}},
            "labels": {"cluster": "sim"}}
    return KpiRecorder(ItemRecord.from_dict({**base, **record}),
                       SuiteKpis(None, {"tps": tps.topsail_kpi}, labels_model=Labels),
                       hook_labels=lambda: {"ocp": "4.16"})


def test_recorded_kpis_carry_metadata_and_merged_validated_labels() -> None:
    kpis = recorder()
    kpis.labels(dataset="alpaca")
    entry = kpis.record("tps", "12.5", labels={"run": 2})
    assert entry["value"] == 12.5 and entry["unit"] == "tokens/s" and entry["higher_better"] is True
    assert entry["labels"] == {"gpus": 8, "hyper.r": 4, "hyper.modules": '["q", "v"]', "ocp": "4.16",
                               "cluster": "sim", "dataset": "alpaca", "run": 2}
    kpis.record("tps", 13)
    assert [k["value"] for k in kpis.item_record.kpis] == [13.0], "recording again replaces the value"


def test_recorder_refuses_what_cannot_be_a_kpi() -> None:
    kpis = recorder()
    with pytest.raises(TopsailError, match="KPI 'tps': value 'fast' is not a number"):
        kpis.record("tps", "fast")
    with pytest.raises(TopsailError, match="is not a finite number"):
        kpis.record("tps", float("nan"))
    with pytest.raises(TopsailError, match="KPI 'odd' is not declared in the suite kpis.py"):
        kpis.record("odd", 1)
    with pytest.raises(TopsailError, match="KPI labels do not match the suite's Labels model: key gpus: "):
        recorder(case={"name": "a", "id": "a", "settings": {"gpus": "many"}}).record("tps", 1)


def test_record_from_runs_every_kpi_function_and_names_a_failing_one() -> None:
    kpis = recorder()
    assert kpis.record_from({"tps": 5}) == {"tps": 5.0}
    with pytest.raises(TopsailError, match=r"KPI function tps\(\) failed: KeyError"):
        kpis.record_from({})


def test_flatten_labels_makes_scalars() -> None:
    assert flatten_labels({"a": {"b": {"c": 1}}, "l": [1, 2], "n": None}) == {"a.b.c": 1, "l": "[1, 2]", "n": None}


def test_openmetrics_escapes_label_values_and_sanitizes_names() -> None:
    entry = {"name": "tps", "value": 2, "unit": "tokens/s", "help": "line\nbreak", "suite": "ft", "test_id": "t",
             "labels": {"hyper.r": 4, "9lives": True, "note": 'say "hi"\\ok\n'}}
    text = render([entry])
    assert "# HELP tps line\\nbreak\n" in text
    assert 'tps{_9lives="true",hyper_r="4",note="say \\"hi\\"\\\\ok\\n",suite="ft",test_id="t"} 2.0\n' in text
    assert text.endswith("# EOF\n")


def test_strict_lts_payload_refuses_a_malformed_record() -> None:
    record = {"suite": "ft", "nodeid": "n", "start": 1.0, "end": 2.0, "outcome": "failed", "case": None,
              "kpis": [{"name": "tps", "value": 1.0, "unit": "x", "help": "h", "timestamp": 1.0, "test_uuid": "u",
                        "higher_better": True, "labels": {"nested": {"label": 1}}}]}
    lenient = build_payload(ItemRecord.from_dict(record), presets=["smoke"], config={})
    assert lenient["metadata"]["exit_code"] == 1 and lenient["metadata"]["presets"] == ["smoke"]
    assert lenient["kpis"]["tps"]["nested.label"] == 1  # labels flattened at the top of the entry
    record["kpis"][0]["unit"] = None
    with pytest.raises(TopsailError, match=r"LTS payload of n: lts.strict is set: key kpis.tps.unit"):
        build_payload(ItemRecord.from_dict(record), presets=[], config={}, strict=True)


def test_lts_payload_never_carries_secrets_of_the_config() -> None:
    config = {"history": {"opensearch": {"url": "https://os", "password": "hunter2", "password_env": "OS_PASS",
                                         "username": "perf"}},
              "tokens": [{"api_key": "k-123"}], "auth_token": "t-456", "secret_file": "/run/secret.yaml",
              "max_tokens": 512}
    record = {"suite": "ft", "nodeid": "n", "start": 1.0, "end": 2.0, "outcome": "passed", "case": None, "kpis": []}
    payload = build_payload(ItemRecord.from_dict(record), presets=[], config=config)
    text = repr(payload)
    assert "hunter2" not in text and "k-123" not in text and "t-456" not in text and "/run/secret" not in text
    assert payload["metadata"]["config"]["history"]["opensearch"]["username"] == "perf"
    assert payload["metadata"]["config"]["history"]["opensearch"]["url"] == "https://os"
    assert payload["metadata"]["config"]["max_tokens"] == 512


def test_scope_and_sample_size_travel_with_the_record() -> None:
    with pytest.raises(TopsailError, match="scope 'deployment' is not one of item, worker, run"):
        kpi(unit="s", help="h", lower_better=True, scope="deployment")
    @kpi(unit="s", help="Model load", lower_better=True, scope="worker")
    def load_s(data: dict) -> float:
        return data["load"]

    @kpi(unit="ms", help="P99", lower_better=True, samples=lambda data: len(data["latencies"]))
    def p99_ms(data: dict) -> float:
        return 9.0

    specs = {"load_s": load_s.topsail_kpi, "p99_ms": p99_ms.topsail_kpi}  # type: ignore[attr-defined]
    record = ItemRecord(suite="s", nodeid="n", test_id="n",
                        case=CaseRecord(name="", id="", settings={"concurrency": 8}))
    recorder = KpiRecorder(record, SuiteKpis(None, specs), hook_labels=lambda: {"gpu": "a100"})
    with pytest.raises(TopsailError, match=r"measured per worker .*kpis.scope\('worker', ...\)"):
        recorder.record("load_s", 3.0)
    recorder.scope("worker", model="m")
    recorder.record_from({"load": 3.0, "latencies": [1, 2, 3]})
    by_name = {k["name"]: k for k in record.kpis}
    assert by_name["load_s"]["scope"] == "worker"
    assert by_name["load_s"]["labels"] == {"gpu": "a100", "model": "m"}, "no case setting: shared by every item"
    assert by_name["p99_ms"]["samples"] == 3 and by_name["p99_ms"]["labels"]["concurrency"] == 8
