"""KPI history in OpenSearch (opensearch-py): one document per test in MatrixBenchmarking's LTS shape
(``pytest_topsail.lts``), ``_id`` = test uuid, which its loader and dashboards read.

Index naming follows MatrixBenchmarking: ``{index_prefix}{index}``, ``index`` defaulting to the suite name; with
``upload_by_kpi: true`` each KPI entry is also stored alone in ``{index}.{kpi}``. The mapping (created when the index
is missing) keeps KPI values numeric (``double``) and their ``@timestamp`` dates, so that dashboards chart them;
labels are keywords; ``metadata``, ``results`` and ``regression_results`` are ``flat_object``. Reading takes our
documents, our documents of before the LTS shape and MatrixBenchmarking's. Credentials come from the settings, the
environment (``TOPSAIL_OPENSEARCH_USERNAME`` / ``TOPSAIL_OPENSEARCH_PASSWORD``) or a secret file; they are never
logged.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from pytest_topsail.config import parse_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.history.records import check_record
from pytest_topsail.lts import lts_document, records_of_document

TOTAL_FIELDS_LIMIT = 4000  # as MatrixBenchmarking: a document's labels and KPIs are many fields


def labels_as_keywords(path: str) -> list[dict[str, Any]]:
    """Dynamic templates: a label under `path` is a keyword whatever its JSON type (a number in one run, a text in
    the next would otherwise be refused)."""
    return [{f"{path.replace('*', 'x').replace('.', '_')}_{kind}": {
        "path_match": path, "match_mapping_type": kind, "mapping": {"type": "keyword"}}}
        for kind in ("string", "long", "double", "boolean")]


KPI_INDEX_BODY = {  # {index}.{kpi}: one KPI entry per document
    "settings": {"index.mapping.total_fields.limit": TOTAL_FIELDS_LIMIT},
    "mappings": {
        "properties": {"value": {"type": "double"}, "@timestamp": {"type": "date"}, "test_uuid": {"type": "keyword"},
                       "lower_better": {"type": "boolean"}, "ignored_for_regression": {"type": "boolean"}},
        "dynamic_templates": labels_as_keywords("*"),
    },
}
INDEX_BODY = {  # one test per document
    "settings": {"index.mapping.total_fields.limit": TOTAL_FIELDS_LIMIT},
    "mappings": {
        "dynamic_templates": [
            {"kpi_values": {"path_match": "kpis.*.value", "mapping": {"type": "double"}}},
            {"kpi_timestamps": {"path_match": "kpis.*.@timestamp", "mapping": {"type": "date"}}},
            *[{f"kpi_{flag}": {"path_match": f"kpis.*.{flag}", "mapping": {"type": "boolean"}}}
              for flag in ("lower_better", "ignored_for_regression")],
            *labels_as_keywords("kpis.*.*"),
        ],
        "properties": {
            "metadata": {"properties": {
                "start": {"type": "date"}, "end": {"type": "date"}, "test_uuid": {"type": "keyword"},
                "exit_code": {"type": "integer"}, "presets": {"type": "keyword"},
                "lts_schema_version": {"type": "keyword"}, "settings": {"type": "flat_object"},
                "config": {"type": "flat_object"}, "topsail": {"type": "flat_object"}}},
            "kpis": {"type": "object"},
            "results": {"type": "flat_object"},
            "regression_results": {"type": "flat_object"},
        },
    },
}
SCROLL_PAGE = 1000  # documents per page when reading an index
SCROLL_KEEP = "2m"  # how long OpenSearch keeps a scroll between pages


def redact_url(url: str) -> str:
    """The URL without user:password@, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass(frozen=True)
class OpenSearchSettings:
    url: str
    index_prefix: str = "topsail-"
    index: str | None = None  # None: the suite name
    username: str | None = None
    password: str | None = None
    verify_certs: bool = True
    timeout: float = 30.0
    upload_by_kpi: bool = False  # also each KPI entry alone in {index}.{kpi} (MatrixBenchmarking's --upload_by_kpi)

    def __repr__(self) -> str:  # never show credentials
        return f"OpenSearchSettings(url={redact_url(self.url)!r}, index_prefix={self.index_prefix!r})"

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> OpenSearchSettings:
        values = dict(settings)
        secret_file = values.pop("secret_file", None) or os.environ.get("TOPSAIL_OPENSEARCH_SECRET_FILE")
        if secret_file:
            path = Path(secret_file)
            try:
                secret = parse_yaml(path.read_text(encoding="utf-8")) or {}
            except (OSError, ValueError, yaml.YAMLError) as error:
                raise TopsailError(f"OpenSearch secret file {path}: cannot be read: {type(error).__name__}") from None
            if not isinstance(secret, dict):
                raise TopsailError(f"OpenSearch secret file {path}: must be a mapping (url, username, password)")
            values = {**secret, **{k: v for k, v in values.items() if v is not None}}
        url = values.get("url") or os.environ.get("TOPSAIL_OPENSEARCH_URL")
        if not url:
            raise TopsailError("history.opensearch.url: no OpenSearch URL (config, TOPSAIL_OPENSEARCH_URL or secret "
                               "file)")
        password_env = values.get("password_env")
        password = values.get("password") or (os.environ.get(password_env) if password_env else None) \
            or os.environ.get("TOPSAIL_OPENSEARCH_PASSWORD")
        known = {"url", "index_prefix", "index", "username", "password", "password_env", "verify_certs", "timeout",
                 "upload_by_kpi"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TopsailError(f"history.opensearch: unknown key(s) {', '.join(unknown)}")
        return cls(
            url=str(url), index_prefix=str(values.get("index_prefix", "topsail-")),
            index=values.get("index"), username=values.get("username") or os.environ.get("TOPSAIL_OPENSEARCH_USERNAME"),
            password=password, verify_certs=bool(values.get("verify_certs", True)),
            timeout=float(values.get("timeout", 30.0)), upload_by_kpi=values.get("upload_by_kpi") is True)


def index_name(settings: OpenSearchSettings, suite: str) -> str:
    name = settings.index or re.sub(r"[^a-z0-9-]+", "-", suite.lower())
    return f"{settings.index_prefix}{name}"


def documents_by_test(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """One LTS document per (suite, test uuid) of the KPI records (only passed tests are stored: exit code 0)."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        grouped[(record["suite"], str(record["test_uuid"]))].append(record)
    return {key: lts_document(kpis, test_uuid=key[1]) for key, kpis in grouped.items()}


def suite_of_index(settings: OpenSearchSettings, index: str) -> str:
    """The suite a document of MatrixBenchmarking's (which does not name one) belongs to: its index name."""
    return index.removeprefix(settings.index_prefix)


class OpenSearchHistory:
    def __init__(self, settings: OpenSearchSettings, client: Any = None) -> None:
        self.settings = settings
        self.created: set[str] = set()
        if client is None:
            try:
                from opensearchpy import OpenSearch
            except ImportError:
                raise TopsailError("the OpenSearch history needs opensearch-py: "
                                   "pip install 'pytest-topsail[opensearch]'") from None

            auth = (settings.username, settings.password) if settings.username else None
            client = OpenSearch(hosts=[settings.url], http_auth=auth, verify_certs=settings.verify_certs,
                                timeout=settings.timeout, ssl_show_warn=False)
        self.client = client

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> OpenSearchHistory:
        return cls(OpenSearchSettings.from_settings(settings))

    def _fail(self, action: str, error: Exception) -> TopsailError:
        # the exception text may echo the URL with credentials: keep only its type and status
        status = getattr(error, "status_code", "")
        return TopsailError(f"OpenSearch {redact_url(self.settings.url)}: {action} failed: "
                            f"{type(error).__name__} {status}".rstrip())

    def ensure_index(self, index: str, body: dict[str, Any]) -> None:
        if index in self.created:
            return
        try:
            if not self.client.indices.exists(index=index):
                self.client.indices.create(index=index, body=body)
        except Exception as error:
            raise self._fail(f"creating index {index}", error) from None
        self.created.add(index)

    def add(self, records: Iterable[dict[str, Any]]) -> int:
        from opensearchpy import helpers

        documents = documents_by_test(check_record(r, "OpenSearch history") for r in records)
        actions = []
        for (suite, test_uuid), document in documents.items():
            index = index_name(self.settings, suite)
            self.ensure_index(index, INDEX_BODY)
            actions.append({"_op_type": "index", "_index": index, "_id": test_uuid, "_source": document})
            if self.settings.upload_by_kpi:
                for name, entry in document["kpis"].items():
                    self.ensure_index(f"{index}.{name}", KPI_INDEX_BODY)
                    actions.append({"_op_type": "index", "_index": f"{index}.{name}", "_id": test_uuid,
                                    "_source": entry})
        try:
            helpers.bulk(self.client, actions, refresh=True)
        except Exception as error:
            raise self._fail("storing KPI documents", error) from None
        return sum(len(d["kpis"]) for d in documents.values())

    def search(self, index: str) -> list[dict[str, Any]]:
        """Every hit of an index (or pattern), read by scrolling pages of SCROLL_PAGE documents (MatrixBenchmarking
        reads one search of 10,000: years of history hold more)."""
        from opensearchpy import helpers

        try:
            return list(helpers.scan(self.client, index=index, query={"query": {"match_all": {}}},
                                     size=SCROLL_PAGE, scroll=SCROLL_KEEP))
        except Exception as error:
            raise self._fail(f"searching {index}", error) from None

    def records(self, suite: str | None = None) -> list[dict[str, Any]]:
        index = index_name(self.settings, suite) if suite else f"{self.settings.index_prefix}*"
        try:
            if suite and not self.client.indices.exists(index=index):
                return []
        except Exception as error:
            raise self._fail(f"searching {index}", error) from None
        records = []
        for hit in self.search(index):
            found, _ = records_of_document(hit["_source"], suite or suite_of_index(self.settings, hit["_index"]))
            records.extend(found)
        return sorted(records, key=lambda r: float(r["timestamp"]))

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if close:
            close()


def dumps_redacted(settings: OpenSearchSettings) -> str:
    return json.dumps({"url": redact_url(settings.url), "index_prefix": settings.index_prefix})
