"""tgis-tester case files, read as they are written for tgis-tester (no change needed).

A case file is a YAML list of cases. A case has a ``name``, ``single_shard_only`` and ``skip_check`` (default false),
a ``request`` (batched ``{prefixId?, adapterId?, params?, requests: [{text}]}`` or single ``{..., request: {text}}``)
and at most one of ``response: {responses: [GenerationResponse]}`` or ``error: {code: GRPC_CODE, message}``. A case
with neither has no expectation yet: ``--tgis-record`` writes one. ``params`` is protobuf JSON, camelCase or
snake_case as tgis-tester's files mix them (``stopping.maxNewTokens``, ``sampling.top_k``). Every problem is one
TopsailError naming the file, the case and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from pytest_topsail.config import load_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis import generation_pb2 as pb

CASE_KEYS = ("name", "single_shard_only", "skip_check", "request", "response", "error")
REQUEST_KEYS = ("prefixId", "prefix_id", "adapterId", "adapter_id", "params", "requests", "request", "modelId",
                "model_id")
GRPC_CODES = tuple(code.name for code in grpc.StatusCode)


@dataclass(frozen=True)
class TgisCase:
    """One case of a case file, checked; ``expected`` and ``error`` as written (``None`` when absent)."""

    name: str
    source: str  # "cases/tgis/x.yaml[2]"
    texts: tuple[str, ...]
    batched: bool
    params: dict[str, Any]
    prefix_id: str | None
    adapter_id: str | None
    single_shard_only: bool = False
    skip_check: bool = False
    expected: tuple[dict[str, Any], ...] | None = None
    error: tuple[str, str] | None = None  # (gRPC code name, message)
    file: str = ""  # the case file as shown (rootdir-relative)
    index: int = 0  # its position in the file

    @property
    def needs_record(self) -> bool:
        return self.expected is None and self.error is None

    def parameters(self) -> pb.Parameters:
        return json_format.ParseDict(self.params, pb.Parameters())

    def as_settings(self) -> dict[str, Any]:
        """The case as JSON-like data (an item's ``case.settings``, carried to the report)."""
        return {"name": self.name, "source": self.source, "texts": list(self.texts), "batched": self.batched,
                "params": self.params, "prefix_id": self.prefix_id, "adapter_id": self.adapter_id,
                "single_shard_only": self.single_shard_only, "skip_check": self.skip_check,
                "expected": list(self.expected) if self.expected is not None else None,
                "error": list(self.error) if self.error is not None else None,
                "file": self.file, "index": self.index}

    @classmethod
    def from_settings(cls, data: Mapping[str, Any]) -> TgisCase:
        return cls(name=data["name"], source=data["source"], texts=tuple(data["texts"]), batched=data["batched"],
                   params=dict(data["params"]), prefix_id=data["prefix_id"], adapter_id=data["adapter_id"],
                   single_shard_only=data["single_shard_only"], skip_check=data["skip_check"],
                   expected=tuple(data["expected"]) if data["expected"] is not None else None,
                   error=(data["error"][0], data["error"][1]) if data["error"] is not None else None,
                   file=data["file"], index=data["index"])


def load_case_file(path: Path, shown: str) -> list[TgisCase]:
    """Every case of one file, checked; the first problem is a TopsailError naming ``shown``, the case and the key."""
    document = load_yaml(path, shown)
    if not isinstance(document, list) or not document:
        raise TopsailError(f"{shown}: a tgis-tester case file is a non-empty YAML list of cases, got "
                           f"{type(document).__name__ if document is not None else 'an empty file'}")
    cases = [replace(parse_case(entry, f"{shown}[{index}]"), file=shown, index=index)
             for index, entry in enumerate(document)]
    seen: dict[str, str] = {}
    for case in cases:
        if case.name in seen:
            raise TopsailError(f"{case.source}: case name {case.name!r} is also the name of {seen[case.name]}")
        seen[case.name] = case.source
    return cases


def parse_case(entry: Any, where: str) -> TgisCase:
    if not isinstance(entry, dict):
        raise TopsailError(f"{where}: a case is a mapping (name, request, response or error), got {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TopsailError(f"{where}: name: every case needs a non-empty name")
    where = f"{where} (case {name!r})"
    _no_unknown_keys(entry, CASE_KEYS, where)
    if "response" in entry and "error" in entry:
        raise TopsailError(f"{where}: has both response and error; a case expects one of them")
    request = entry.get("request")
    if not isinstance(request, dict):
        raise TopsailError(f"{where}: request: a mapping with requests: [{{text}}] or request: {{text}} is required")
    _no_unknown_keys(request, REQUEST_KEYS, f"{where}: request")
    texts, batched = _texts(request, f"{where}: request")
    params = request.get("params") or {}
    if not isinstance(params, dict):
        raise TopsailError(f"{where}: request.params: a mapping of TGIS parameters, got {params!r}")
    try:
        json_format.ParseDict(params, pb.Parameters())
    except json_format.ParseError as error:
        raise TopsailError(f"{where}: request.params: {error}") from None
    return TgisCase(
        name=name.strip(), source=where, texts=texts, batched=batched, params=params,
        prefix_id=_optional_text(request, ("prefixId", "prefix_id"), f"{where}: request"),
        adapter_id=_optional_text(request, ("adapterId", "adapter_id"), f"{where}: request"),
        single_shard_only=_flag(entry, "single_shard_only", where), skip_check=_flag(entry, "skip_check", where),
        expected=_expected(entry["response"], len(texts), where) if "response" in entry else None,
        error=_error(entry["error"], where) if "error" in entry else None)


def _texts(request: dict[str, Any], where: str) -> tuple[tuple[str, ...], bool]:
    if ("requests" in request) == ("request" in request):
        raise TopsailError(f"{where}: give either requests: [{{text}}] (batched) or request: {{text}} (single)")
    batched = "requests" in request
    items = request["requests"] if batched else [request["request"]]
    if not isinstance(items, list) or not items:
        raise TopsailError(f"{where}.requests: a non-empty list of {{text: ...}}")
    texts = []
    for index, item in enumerate(items):
        key = f"requests[{index}]" if batched else "request"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or set(item) - {"text"}:
            raise TopsailError(f"{where}.{key}: expected {{text: <prompt>}}, got {item!r}")
        texts.append(item["text"])
    return tuple(texts), batched


def _expected(response: Any, count: int, where: str) -> tuple[dict[str, Any], ...]:
    responses = response.get("responses") if isinstance(response, dict) else None
    if not isinstance(responses, list) or set(response) - {"responses"}:
        raise TopsailError(f"{where}: response: expected {{responses: [GenerationResponse, ...]}}")
    if len(responses) != count:
        raise TopsailError(f"{where}: response.responses: {len(responses)} responses for {count} request(s)")
    for index, item in enumerate(responses):
        try:
            json_format.ParseDict(_json_floats(item), pb.GenerationResponse())
        except (json_format.ParseError, TypeError, AttributeError) as error:
            raise TopsailError(f"{where}: response.responses[{index}]: {error}") from None
    return tuple(responses)


def _error(error: Any, where: str) -> tuple[str, str]:
    if not isinstance(error, dict) or set(error) - {"code", "message"} or "code" not in error:
        raise TopsailError(f"{where}: error: expected {{code: <gRPC code name>, message: <text>}}, got {error!r}")
    code = str(error["code"])
    if code not in GRPC_CODES:
        raise TopsailError(f"{where}: error.code: {code!r} is not a gRPC code name (one of {', '.join(GRPC_CODES)})")
    message = error.get("message", "")
    if not isinstance(message, str):
        raise TopsailError(f"{where}: error.message: expected text, got {message!r}")
    return code, message


def _json_floats(value: Any) -> Any:
    """YAML's .nan / .inf as the strings protobuf JSON uses for them."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _json_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_floats(item) for item in value]
    return value


def _no_unknown_keys(mapping: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = [str(key) for key in mapping if key not in known]
    if unknown:
        raise TopsailError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(known)}")


def _flag(entry: dict[str, Any], key: str, where: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise TopsailError(f"{where}: {key}: expected true or false, got {value!r}")
    return value


def _optional_text(request: dict[str, Any], keys: tuple[str, ...], where: str) -> str | None:
    for key in keys:
        if key in request:
            if not isinstance(request[key], str):
                raise TopsailError(f"{where}.{key}: expected text, got {request[key]!r}")
            return request[key]
    return None
