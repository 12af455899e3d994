"""History backends: SQLite (WAL, concurrent writers), JSON-lines export/import, OpenSearch against a tiny fake
OpenSearch HTTP server on 127.0.0.1 (documents, index naming, mapping, credentials never shown)."""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import yaml

from pytest_topsail.errors import TopsailError
from pytest_topsail.history import export_jsonl, import_jsonl
from pytest_topsail.history.__main__ import main as history_cli
from pytest_topsail.history.opensearch import OpenSearchHistory, OpenSearchSettings
from pytest_topsail.history.sqlite import SqliteHistory
from tests.report.conftest import Project, read_json

PASSWORD = "s3cr3t-pa55"


def kpi(name: str, value: float, timestamp: float, uuid: str, suite: str = "demo") -> dict[str, Any]:
    return {"name": name, "value": value, "unit": "ms", "suite": suite, "timestamp": timestamp, "test_uuid": uuid,
            "higher_better": False, "labels": {"size": 1}, "nodeid": f"{suite}::t"}


def test_sqlite_history_is_created_on_first_use_and_keeps_records_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "history.sqlite"
    store = SqliteHistory(path)
    assert store.add([kpi("a", 2, 20.0, "u2"), kpi("a", 1, 10.0, "u1"), kpi("b", 5, 15.0, "u1", suite="x")]) == 3
    store.add([kpi("a", 3, 20.0, "u2")])  # same test uuid and KPI: replaced
    store.close()
    again = SqliteHistory(path)
    assert [(r["name"], r["value"]) for r in again.records("demo")] == [("a", 1.0), ("a", 3.0)]
    assert len(again.records()) == 3
    mode = again.connection.execute("PRAGMA journal_mode").fetchone()[0]
    again.close()
    assert mode == "wal"


def test_sqlite_history_accepts_concurrent_writers(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    SqliteHistory(path).close()
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            store = SqliteHistory(path)
            for batch in range(20):
                store.add([kpi("k", i, float(i), f"w{worker}-b{batch}-{i}") for i in range(10)])
            store.close()
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    store = SqliteHistory(path)
    assert len(store.records()) == 4 * 20 * 10
    store.close()


def test_sqlite_history_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(TopsailError, match=r"KPI history .*file/h.sqlite: cannot be opened"):
        SqliteHistory(tmp_path / "file" / "h.sqlite")


def test_export_then_import_round_trips_the_history(tmp_path: Path) -> None:
    source = SqliteHistory(tmp_path / "a.sqlite")
    source.add([kpi("a", i, float(i), f"u{i}") for i in range(5)] + [kpi("b", 1, 1.0, "x", suite="other")])
    out = io.StringIO()
    assert export_jsonl(source, out, "demo") == 5
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["value"] for line in lines] == [0, 1, 2, 3, 4]
    source.close()
    (tmp_path / "seed.jsonl").write_text(out.getvalue())
    target = SqliteHistory(tmp_path / "b.sqlite")
    assert import_jsonl(target, tmp_path / "seed.jsonl") == 5
    assert target.records() == [json.loads(line) for line in lines]
    target.close()


def test_import_names_the_bad_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(kpi("a", 1, 1.0, "u")) + "\n{not json\n")
    store = SqliteHistory(tmp_path / "h.sqlite")
    with pytest.raises(TopsailError, match=r"bad.jsonl:2: not JSON"):
        import_jsonl(store, bad)
    bad.write_text(json.dumps({"name": "a", "value": 1}) + "\n")
    with pytest.raises(TopsailError, match=r"bad.jsonl:1: KPI record misses suite, timestamp, test_uuid"):
        import_jsonl(store, bad)
    assert store.records() == []
    store.close()


def test_history_cli_exports_and_imports(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.run()
    out = project.path / "export.jsonl"
    assert history_cli(["export", "--history", str(project.history), "--suite", "demo", "-o", str(out)]) == 0
    assert "exported 6 KPI record(s)" in capsys.readouterr().err
    copy = project.path / "copy.sqlite"
    assert history_cli(["import", "--history", str(copy), str(out)]) == 0
    assert history_cli(["export", "--history", str(copy)]) == 0
    exported = capsys.readouterr().out.splitlines()
    assert exported == out.read_text().splitlines()
    assert history_cli(["import", "--history", str(copy), "missing.jsonl"]) == 2
    assert "error: not found: missing.jsonl" in capsys.readouterr().err


# ---------------------------------------------------------------- OpenSearch


class FakeOpenSearch(ThreadingHTTPServer):
    """Just enough of the OpenSearch REST API for the history backend: index exists/create, _bulk, _search with
    its scroll (pages of ``size`` hits)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.indices: dict[str, dict[str, Any]] = {}  # name -> {"mapping": ..., "docs": {id: source}}
        self.auth_headers: list[str | None] = []
        self.requests: list[str] = []
        self.scrolls: dict[str, list[dict[str, Any]]] = {}  # scroll id -> the hits not returned yet
        self.page_sizes: dict[str, int] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class FakeHandler(BaseHTTPRequestHandler):
    server: FakeOpenSearch

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _route(self) -> None:
        self.server.auth_headers.append(self.headers.get("Authorization"))
        path = self.path.split("?", 1)[0].strip("/")
        self.server.requests.append(f"{self.command} /{path}")
        body = self._body()
        indices = self.server.indices
        if self.command == "HEAD":
            return self._answer(200 if path in indices else 404)
        if self.command == "PUT" and "/" not in path:
            indices[path] = {"mapping": json.loads(body), "docs": {}}
            return self._answer(200, {"acknowledged": True, "index": path})
        if path == "_bulk":
            lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
            items = []
            for action, source in zip(lines[::2], lines[1::2], strict=True):
                meta = action["index"]
                indices.setdefault(meta["_index"], {"mapping": None, "docs": {}})["docs"][meta["_id"]] = source
                items.append({"index": {"_index": meta["_index"], "_id": meta["_id"], "status": 201}})
            return self._answer(200, {"took": 1, "errors": False, "items": items})
        if path == "_search/scroll":
            if self.command == "DELETE":
                return self._answer(200, {"succeeded": True})
            scroll_id = json.loads(body)["scroll_id"]
            return self._page(scroll_id)
        if path.endswith("/_search"):
            pattern = path.rsplit("/", 1)[0]
            names = [n for n in indices if n == pattern or (pattern.endswith("*") and n.startswith(pattern[:-1]))]
            hits = [{"_index": n, "_id": i, "_source": s} for n in names for i, s in indices[n]["docs"].items()]
            query = parse_qs(self.path.partition("?")[2])
            if "scroll" in query:
                scroll_id = f"scroll-{len(self.server.scrolls)}"
                self.server.scrolls[scroll_id] = hits
                self.server.page_sizes[scroll_id] = int(query.get("size", ["10"])[0])
                return self._page(scroll_id)
            return self._answer(200, {"hits": {"total": {"value": len(hits)}, "hits": hits}})
        return self._answer(400, {"error": f"fake OpenSearch: {self.command} /{path} not supported"})

    def _page(self, scroll_id: str) -> None:
        """The next page of a scroll: ``size`` hits, the rest kept for the next request."""
        hits, size = self.server.scrolls[scroll_id], self.server.page_sizes[scroll_id]
        page, self.server.scrolls[scroll_id] = hits[:size], hits[size:]
        return self._answer(200, {"_scroll_id": scroll_id, "_shards": {"total": 1, "successful": 1, "skipped": 0,
                                                                        "failed": 0},
                                  "hits": {"total": {"value": len(hits)}, "hits": page}})

    do_HEAD = do_GET = do_PUT = do_POST = do_DELETE = _route


@pytest.fixture
def fake_opensearch() -> Iterator[FakeOpenSearch]:
    server = FakeOpenSearch()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_opensearch_history_stores_one_document_per_test_with_the_mapping(fake_opensearch: FakeOpenSearch) -> None:
    store = OpenSearchHistory.from_settings({"url": fake_opensearch.url, "index_prefix": "psap-",
                                             "username": "admin", "password": PASSWORD, "timeout": 5})
    assert store.records("fine_tuning") == []
    assert store.add([kpi("a", 1, 10.0, "u1", suite="fine_tuning"), kpi("b", 2, 10.0, "u1", suite="fine_tuning"),
                      kpi("a", 3, 20.0, "u2", suite="fine_tuning")]) == 3
    index = fake_opensearch.indices["psap-fine-tuning"]
    assert set(index["docs"]) == {"u1", "u2"}
    assert set(index["docs"]["u1"]["kpis"]) == {"a", "b"}
    assert index["mapping"]["mappings"]["dynamic_templates"][0] == {
        "kpi_values": {"path_match": "kpis.*.value", "mapping": {"type": "double"}}}
    assert [(r["name"], r["value"]) for r in store.records("fine_tuning")] == [("a", 1), ("b", 2), ("a", 3)]
    assert len(store.records()) == 3
    store.close()
    expected = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    assert set(fake_opensearch.auth_headers) == {expected}


def test_opensearch_credentials_from_a_secret_file_never_appear_in_messages(
        fake_opensearch: FakeOpenSearch, tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(yaml.safe_dump({"url": fake_opensearch.url.replace("http://", f"http://admin:{PASSWORD}@"),
                                      "username": "admin", "password": PASSWORD}))
    settings = OpenSearchSettings.from_settings({"secret_file": str(secret), "index": "custom"})
    assert PASSWORD not in repr(settings)
    broken = OpenSearchHistory(OpenSearchSettings.from_settings({"url": "http://127.0.0.1:1", "password": PASSWORD,
                                                                  "username": "admin", "timeout": 2}))
    with pytest.raises(TopsailError) as error:
        broken.records("demo")
    assert "OpenSearch http://127.0.0.1:1: searching topsail-demo failed: ConnectionError" in str(error.value)
    assert PASSWORD not in str(error.value)
    with pytest.raises(TopsailError, match="history.opensearch: unknown key"):
        OpenSearchSettings.from_settings({"url": "http://x", "passwd": "x"})
    with pytest.raises(TopsailError, match="no OpenSearch URL"):
        OpenSearchSettings.from_settings({})


def test_a_session_uses_opensearch_history_from_the_suite_config(
        project: Project, fake_opensearch: FakeOpenSearch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPSAIL_OPENSEARCH_PASSWORD", PASSWORD)
    project.write("suites/demo/config.yaml", f"""
        cases: [cases/demo.yaml]
        history:
          opensearch: {{url: "{fake_opensearch.url}", index_prefix: "topsail-", username: admin, timeout: 5}}
        """)
    for _ in range(2):
        result = project.run("--topsail-history", "opensearch")
        assert result.ret == 0
    assert not project.history.exists()
    documents = fake_opensearch.indices["topsail-demo"]["docs"]
    assert len(documents) == 4 and all(len(doc["kpis"]) == 3 for doc in documents.values())
    verdicts = read_json(project.artifacts("s2") / "verdicts.json")
    assert {v["history_size"] for v in verdicts} == {1}
    for path in project.path.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".yaml", ".html", ".prom", ".xml", ".txt"):
            assert PASSWORD not in path.read_text(errors="replace"), path
    assert PASSWORD not in result.stdout.str()


def regressed(name: str, value: float, timestamp: float, uuid: str, run: str) -> dict[str, Any]:
    return {**kpi(name, value, timestamp, uuid), "verdict": "regression", "run_id": run}


def test_ack_marks_whole_tests_in_opensearch(fake_opensearch: FakeOpenSearch) -> None:
    """One OpenSearch document is one test: acknowledging one KPI rewrites the document with all its KPIs."""
    from pytest_topsail.history.acks import Ack, acknowledge

    store = OpenSearchHistory.from_settings({"url": fake_opensearch.url, "timeout": 5})
    store.add([regressed("a", 9, 10.0, "u1", "r1"), kpi("b", 2, 10.0, "u1"), regressed("a", 9, 20.0, "u2", "r2")])
    changed = acknowledge(store, "demo", Ack(reason="expected", run="r1"))
    assert [(r["name"], r["test_uuid"]) for r in changed] == [("a", "u1")]
    document = fake_opensearch.indices["topsail-demo"]["docs"]["u1"]
    own = document["metadata"]["topsail"]
    assert set(document["kpis"]) == {"a", "b"} and own["kpis"]["a"]["acknowledged"]["reason"] == "expected"
    assert document["regression_results"] == {"a": {"verdict": "regression", "acknowledged": True}}
    assert own["kpis"]["a"]["run_id"] == "r1"
    assert "acknowledged" not in fake_opensearch.indices["topsail-demo"]["docs"]["u2"]["metadata"]["topsail"]
    store.close()


def test_history_cli_lists_and_acknowledges_pending_regressions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h.sqlite"
    store = SqliteHistory(path)
    store.add([regressed("lat", 9, 10.0, "u1", "r1"), regressed("thr", 1, 10.0, "u1", "r1"),
               regressed("lat", 9, 20.0, "u2", "r2"), kpi("lat", 5, 5.0, "u0")])
    store.close()
    assert history_cli(["pending", "--history", str(path), "--suite", "demo"]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 3 and "r1  u1  lat=9 ms" in out
    assert "3 regression record(s) of suite demo wait for an acknowledgement" in err
    assert history_cli(["ack", "--history", str(path), "--suite", "demo", "--run", "r1", "--kpi", "l*",
                        "--reason", "known"]) == 0
    assert "acknowledged 1 regression record(s) of suite demo (runs: r1)" in capsys.readouterr().err
    store = SqliteHistory(path)
    acked = {(r["name"], r["run_id"]) for r in store.records("demo") if r.get("acknowledged")}
    store.close()
    assert acked == {("lat", "r1")}
    assert history_cli(["ack", "--history", str(path), "--suite", "demo", "--run", "r1", "--kpi", "lat",
                        "--reason", "again"]) == 2
    assert "no unacknowledged regression of suite demo matches" in capsys.readouterr().err
    assert history_cli(["ack", "--history", str(path), "--suite", "demo", "--reason", " "]) == 2
    assert "--reason is empty" in capsys.readouterr().err
    assert history_cli(["pending", "--history", str(tmp_path / "none.sqlite"), "--suite", "demo"]) == 2
    assert "KPI history" in capsys.readouterr().err and not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("run: r1\n", "must be a list of {run or test_uuid, kpis, reason}"),
    ("- {run: r1}\n", "entry 1: reason is missing"),
    ("- {run: r1, reason: x, kpi: [a]}\n", "entry 1: unknown key(s) kpi; known: run, test_uuid, kpis, reason"),
    ("- {run: r1, reason: x, kpis: 3}\n", "entry 1: kpis must be a list"),
    ("- [unclosed\n", "malformed YAML"),
    ("- {run: r1, reason: x, reason: y}\n", "reason"),
])
def test_a_bad_ack_file_is_one_message_naming_it(tmp_path: Path, text: str, message: str) -> None:
    from pytest_topsail.history.acks import load_ack_file

    path = tmp_path / "acks.yaml"
    path.write_text(text)
    with pytest.raises(TopsailError) as error:
        load_ack_file(path)
    assert str(error.value).startswith(f"{path}: ") and message in str(error.value)
