"""Documents in MatrixBenchmarking's LTS shape and the import of its (and TOPSAIL's) history.

The models below are written from the facts of MatrixBenchmarking's ``models.KPI`` and loader (see
docs/kpis-and-regressions.md, "Coming from TOPSAIL / MatrixBenchmarking"): a KPI entry has ``value``, ``unit``,
``help``, ``@timestamp``, ``test_uuid``, ``lower_better``, ``ignored_for_regression``, the optional format fields and
the suite's labels as typed fields, and refuses any other field; the loader reads ``metadata.settings`` first.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from pytest_topsail.history.__main__ import main as history_cli
from pytest_topsail.history.opensearch import OpenSearchHistory, documents_by_test
from pytest_topsail.history.sqlite import SqliteHistory
from pytest_topsail.lts import records_of_document
from tests.report.conftest import Project, read_json
from tests.report.test_history import FakeOpenSearch
from tests.report.test_history import fake_opensearch as fake_opensearch  # the fixture, for this module too


class MatbenchKPI(pydantic.BaseModel):
    """MatrixBenchmarking's KPI entry: its fields, the labels of the suite (the demo suite's), nothing else."""

    model_config = pydantic.ConfigDict(extra="forbid")

    value: float | int
    unit: str
    help: str
    timestamp: datetime.datetime = pydantic.Field(alias="@timestamp")
    test_uuid: str
    lower_better: bool
    ignored_for_regression: bool
    format: str | None = None
    divisor: float | None = None
    divisor_unit: str | None = None
    # the demo suite's labels (its Labels model and its cluster labels hook)
    size: int
    image: str
    ocp_version: str


def matbench_loader_settings(document: dict[str, Any]) -> dict[str, Any]:
    """What MatrixBenchmarking's loader reads first of a document: a KeyError when it is not there."""
    return dict(document["metadata"]["settings"])


def history_after_two_sessions(project: Project) -> list[dict[str, Any]]:
    for _ in range(2):
        assert project.run().ret == 0
    store = SqliteHistory(project.history)
    try:
        return store.records("demo")
    finally:
        store.close()


def key(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["test_uuid"], r["name"]) for r in records)


def test_our_documents_are_matrixbenchmarking_documents_and_round_trip_through_the_importer(
        project: Project, fake_opensearch: FakeOpenSearch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    records = history_after_two_sessions(project)
    assert len(records) == 12 and {r["verdict"] for r in records} >= {"no_history"}
    for path in project.artifacts("s2").rglob("lts.json"):  # each item's lts.json: the same shape
        document = read_json(path)
        assert matbench_loader_settings(document) == {"size": document["kpis"]["latency"]["size"]}
        assert all(MatbenchKPI.model_validate(entry) for entry in document["kpis"].values())
    # written to OpenSearch as MatrixBenchmarking writes them (one document per test, and one per KPI entry)
    store = OpenSearchHistory.from_settings({"url": fake_opensearch.url, "timeout": 5, "upload_by_kpi": True})
    assert store.add(records) == 12
    store.close()
    index = fake_opensearch.indices["topsail-demo"]
    assert len(index["docs"]) == 4
    for document in index["docs"].values():
        assert set(matbench_loader_settings(document)) == {"size", "image", "ocp_version"}
        metadata = document["metadata"]
        assert {"start", "end", "test_uuid", "exit_code", "presets", "config", "lts_schema_version"} <= set(metadata)
        datetime.datetime.fromisoformat(metadata["start"])
        for entry in document["kpis"].values():
            MatbenchKPI.model_validate(entry)  # its model accepts every entry (extra fields refused)
            assert isinstance(entry["value"], float)
    # the mappings keep values numeric: the per-test index and the per-KPI indices
    templates = index["mapping"]["mappings"]["dynamic_templates"]
    assert {"kpi_values": {"path_match": "kpis.*.value", "mapping": {"type": "double"}}} in templates
    assert {"kpi_timestamps": {"path_match": "kpis.*.@timestamp", "mapping": {"type": "date"}}} in templates
    assert index["mapping"]["mappings"]["properties"]["kpis"] == {"type": "object"}
    assert index["mapping"]["settings"] == {"index.mapping.total_fields.limit": 4000}
    per_kpi = fake_opensearch.indices["topsail-demo.latency"]
    assert per_kpi["mapping"]["mappings"]["properties"]["value"] == {"type": "double"}
    assert len(per_kpi["docs"]) == 4 and all(MatbenchKPI.model_validate(d) for d in per_kpi["docs"].values())
    assert "PUT /topsail-demo.throughput" in fake_opensearch.requests

    # imported back from OpenSearch: the same history, record for record
    imported = tmp_path / "from-opensearch.sqlite"
    assert history_cli(["import", "--history", str(imported), "--from-opensearch", fake_opensearch.url,
                        "topsail-demo"]) == 0
    assert "imported 12 KPI record(s)" in capsys.readouterr().err
    again = SqliteHistory(imported)
    assert sorted(again.records("demo"), key=lambda r: (r["test_uuid"], r["name"])) == \
        sorted(records, key=lambda r: (r["test_uuid"], r["name"]))
    again.close()
    # and from a JSON dump of the documents (one file per document, as MatrixBenchmarking downloads them)
    dump = tmp_path / "dump"
    dump.mkdir()
    for number, document in enumerate(documents_by_test(records).values()):
        (dump / f"{number}.json").write_text(json.dumps(document))
    from_json = tmp_path / "from-json.sqlite"
    assert history_cli(["import", "--history", str(from_json), "--from-json", str(dump)]) == 0
    again = SqliteHistory(from_json)
    assert sorted(again.records(), key=lambda r: (r["test_uuid"], r["name"])) == \
        sorted(records, key=lambda r: (r["test_uuid"], r["name"]))
    again.close()


def test_our_history_reader_reads_our_documents_of_before_the_lts_shape() -> None:
    old: dict[str, Any] = {"@timestamp": "2026-01-01T00:00:00+00:00", "suite": "demo", "test_uuid": "u1",
                           "metadata": {"nodeid": "n", "labels": {"size": 1}}, "results": {},
                           "regression_results": {},
                           "kpis": {"a": {"name": "a", "value": 1.0, "suite": "demo", "timestamp": 10.0,
                                          "test_uuid": "u1", "higher_better": True, "labels": {"size": 1}}}}
    records, problems = records_of_document(old)
    assert records == [old["kpis"]["a"]] and problems == []


def matbench_document(number: int, value: float, latency: float) -> dict[str, Any]:
    """A document as MatrixBenchmarking's upload writes it (written from its facts, not produced by our code)."""
    start = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC) + datetime.timedelta(days=number)
    stamp = start.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    uuid = f"00000000-0000-4000-8000-{number:012d}"
    settings = {"size": 1, "container_image": "v1", "ocp_version": "4.15", "accelerator_type": "H100"}
    entry = {"@timestamp": stamp, "test_uuid": uuid, "ignored_for_regression": False, **settings}
    return {
        "metadata": {"start": stamp, "end": (start + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                     "settings": settings, "test_uuid": uuid, "exit_code": 0, "urls": {}, "presets": ["light"],
                     "config": "tests:\n  fine_tuning: {}\n", "lts_schema_version": "1.0", "ci_engine": "PROW",
                     "run_id": f"prow-{number}", "test_path": "fine_tuning/001__train"},
        "results": {"train_runtime": 42},
        "kpis": {
            "throughput": {**entry, "value": value, "unit": "tokens/s", "help": "Training throughput",
                           "lower_better": False, "format": "{:.1f}"},
            "latency": {**entry, "value": latency, "unit": "ms", "help": "Step latency", "lower_better": True},
            "loss_curve": {**entry, "value": [1.0, 0.5], "unit": "", "help": "a list", "lower_better": True},
        },
    }


@pytest.fixture
def matbench_dump(tmp_path: Path) -> Iterator[Path]:
    dump = tmp_path / "matbench"
    dump.mkdir()
    for number in range(6):
        (dump / f"{number:03d}.json").write_text(json.dumps(matbench_document(number, 100.0 + number % 2,
                                                                              10.0 - 0.1 * (number % 2))))
    yield dump


def test_matrixbenchmarking_history_imports_as_the_first_runs_baseline(
        project: Project, matbench_dump: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project.path)
    history = str(project.history)
    # dry run: per suite and KPI, and the labels the suite does not declare; nothing stored
    assert history_cli(["import", "--history", history, "--from-json", str(matbench_dump), "--suite", "demo",
                        "--dry-run"]) == 0
    out = capsys.readouterr().err
    assert "would import 12 KPI record(s) from 6 document(s)" in out
    assert "suite demo: latency 6, throughput 6" in out
    assert "labels its Labels model does not declare" in out and "accelerator_type, container_image, ocp_version" \
        in out
    assert "value [1.0, 0.5] is not a number" in out
    assert not project.history.exists()
    # imported with their settings mapped to our labels
    assert history_cli(["import", "--history", history, "--from-json", str(matbench_dump), "--suite", "demo",
                        "--map-label", "container_image=image", "--map-label", "accelerator_type="]) == 0
    capsys.readouterr()
    store = SqliteHistory(project.history)
    records = store.records("demo")
    store.close()
    assert len(records) == 12
    assert records[0]["labels"] == {"size": 1, "image": "v1", "ocp_version": "4.15"}
    assert records[0]["run_id"] == "prow-0" and records[0]["presets"] == ["light"]
    # the first run here is judged against them
    result = project.run()
    assert result.ret == 0
    verdicts = {(v["kpi"], v["labels"]["size"]): v for v in read_json(project.artifacts("s1") / "verdicts.json")}
    assert verdicts[("throughput", 1)]["history_size"] == 6
    assert verdicts[("throughput", 1)]["status"] not in ("no_history", "insufficient_history")
    assert verdicts[("latency", 1)]["history_size"] == 6
    assert verdicts[("throughput", 2)]["status"] == "no_history"  # they had no size=2 run
    # a second import now checks against the history: the labels it does not know are dropped and named
    assert history_cli(["import", "--history", history, "--from-json", str(matbench_dump), "--suite", "demo",
                        "--dry-run"]) == 0
    out = capsys.readouterr().err
    assert "labels not mapped (dropped; the history does not know them): accelerator_type, container_image" in out
    assert "labels of the history the imported records lack" in out and ": image (" in out


def test_an_import_without_a_suite_or_source_is_one_clear_error(
        matbench_dump: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = str(tmp_path / "h.sqlite")
    assert history_cli(["import", "--history", history, "--from-json", str(matbench_dump)]) == 2
    assert "names no suite: give --suite" in capsys.readouterr().err
    assert history_cli(["import", "--history", history]) == 2
    assert "nothing to import" in capsys.readouterr().err
    assert history_cli(["import", "--history", history, "--from-json", str(tmp_path / "none")]) == 2
    assert "not found:" in capsys.readouterr().err
    assert history_cli(["import", "--history", history, "--from-json", str(matbench_dump), "--suite", "demo",
                        "--map-label", "nonsense"]) == 2
    assert "THEIRS=OURS expected" in capsys.readouterr().err
    assert not Path(history).exists()


def test_our_opensearch_history_reads_matrixbenchmarkings_documents(
        fake_opensearch: FakeOpenSearch, monkeypatch: pytest.MonkeyPatch) -> None:
    """Their documents in the suite's index (no ``timestamp`` field: @timestamp ISO) are history records, every
    one of them however many pages the index takes."""
    monkeypatch.setattr("pytest_topsail.history.opensearch.SCROLL_PAGE", 2)
    documents = {str(n): matbench_document(n, 100.0 + n, 10.0) for n in range(3)}
    fake_opensearch.indices["topsail-demo"] = {"mapping": None, "docs": documents}
    store = OpenSearchHistory.from_settings({"url": fake_opensearch.url, "timeout": 5})
    records = store.records("demo")
    store.close()
    assert [(r["name"], r["value"]) for r in records if r["name"] == "throughput"] == [
        ("throughput", 100.0), ("throughput", 101.0), ("throughput", 102.0)]
    first = records[0]
    assert first["timestamp"] == datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC).timestamp()
    assert first["labels"]["container_image"] == "v1" and first["suite"] == "demo"
    assert {r["higher_better"] for r in records if r["name"] == "latency"} == {False}
    assert fake_opensearch.requests.count("POST /_search/scroll") == 2  # pages of 2 and 1, then an empty one


def test_their_history_imports_into_an_opensearch_history(
        matbench_dump: Path, fake_opensearch: FakeOpenSearch, tmp_path: Path) -> None:
    """Into OpenSearch: their documents come back in our shape in the suite's index, settings mapped."""
    settings = tmp_path / "opensearch.yaml"
    settings.write_text(f"url: {fake_opensearch.url}\nindex_prefix: psap-\ntimeout: 5\n")
    assert history_cli(["import", "--history", "opensearch", "--opensearch-config", str(settings),
                        "--from-json", str(matbench_dump), "--suite", "fine_tuning",
                        "--map-label", "container_image=image", "--map-label", "accelerator_type="]) == 0
    documents = fake_opensearch.indices["psap-fine-tuning"]["docs"]
    assert len(documents) == 6
    document = documents["00000000-0000-4000-8000-000000000000"]
    assert document["metadata"]["settings"] == {"size": 1, "image": "v1", "ocp_version": "4.15"}
    assert document["metadata"]["topsail"]["suite"] == "fine_tuning"
    assert document["kpis"]["throughput"]["@timestamp"] == "2026-06-01T00:00:00.000000Z"
    assert all(MatbenchKPI.model_validate(entry) for entry in document["kpis"].values())
