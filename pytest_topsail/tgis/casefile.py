"""tgis-tester case files, read as they are written for tgis-tester (no change needed).

A case file is a YAML list of cases. A case has a ``name``, ``single_shard_only`` and ``skip_check`` (default false),
a ``request`` (batched ``{prefixId?, adapterId?, params?, requests: [{text}]}`` or single ``{..., request: {text}}``)
and at most one of ``response: {responses: [GenerationResponse]}``, ``response: [GenerationResponse, ...]`` (the
streaming form: the messages of GenerateStream, for a single request) or ``error: {code: GRPC_CODE, message}``. A case
with neither has no expectation yet: ``--tgis-record`` writes one. ``params`` is protobuf JSON, camelCase or
snake_case as tgis-tester's files mix them (``stopping.maxNewTokens``, ``sampling.top_k``).

A key nobody knows (in a case, its request, params or responses) is ignored as tgis-tester ignores it, and reported
once per file (a TgisCaseFileWarning naming the file and every such key); ``strict=True`` refuses the file instead.
Every other problem is one TopsailError naming the file, the case and the key.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pytest_topsail.config import load_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis.evaluation import merge_stream

CASE_KEYS = ("name", "single_shard_only", "skip_check", "request", "response", "error")
REQUEST_KEYS = ("prefixId", "prefix_id", "adapterId", "adapter_id", "params", "requests", "request", "modelId",
                "model_id")
GRPC_CODES = tuple(code.name for code in grpc.StatusCode)


class TgisCaseFileWarning(UserWarning):
    """A case file has keys tgis-tester ignores: they are ignored here too."""


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
    stream_form: bool = False  # the file gives the expectation as GenerateStream's messages (merged in ``expected``)
    file: str = ""  # the case file as shown (rootdir-relative)
    index: int = 0  # its position in the file

    @property
    def needs_record(self) -> bool:
        return self.expected is None and self.error is None

    @property
    def streamable(self) -> bool:
        """One text and no expected error: also streamed (tgis-tester's streaming twin), its merged stream judged
        against the unary expectation."""
        return len(self.texts) == 1 and self.error is None

    def parameters(self) -> pb.Parameters:
        return json_format.ParseDict(self.params, pb.Parameters(), ignore_unknown_fields=True)

    def as_settings(self) -> dict[str, Any]:
        """The case as JSON-like data (an item's ``case.settings``, carried to the report)."""
        return {"name": self.name, "source": self.source, "texts": list(self.texts), "batched": self.batched,
                "params": self.params, "prefix_id": self.prefix_id, "adapter_id": self.adapter_id,
                "single_shard_only": self.single_shard_only, "skip_check": self.skip_check,
                "expected": list(self.expected) if self.expected is not None else None,
                "error": list(self.error) if self.error is not None else None,
                "stream_form": self.stream_form, "file": self.file, "index": self.index}

    @classmethod
    def from_settings(cls, data: Mapping[str, Any]) -> TgisCase:
        return cls(name=data["name"], source=data["source"], texts=tuple(data["texts"]), batched=data["batched"],
                   params=dict(data["params"]), prefix_id=data["prefix_id"], adapter_id=data["adapter_id"],
                   single_shard_only=data["single_shard_only"], skip_check=data["skip_check"],
                   expected=tuple(data["expected"]) if data["expected"] is not None else None,
                   error=(data["error"][0], data["error"][1]) if data["error"] is not None else None,
                   stream_form=data["stream_form"], file=data["file"], index=data["index"])


def load_case_file(path: Path, shown: str, strict: bool = False, warn: bool = True) -> list[TgisCase]:
    """Every case of one file, checked; the first problem is a TopsailError naming ``shown``, the case and the key.
    Unknown keys: one TgisCaseFileWarning for the file (unless not ``warn``), or (``strict``) a TopsailError."""
    document = load_yaml(path, shown)
    if not isinstance(document, list) or not document:
        raise TopsailError(f"{shown}: a tgis-tester case file is a non-empty YAML list of cases, got "
                           f"{type(document).__name__ if document is not None else 'an empty file'}")
    unknown: list[str] = []
    cases = [replace(parse_case(entry, f"{shown}[{index}]", unknown), file=shown, index=index)
             for index, entry in enumerate(document)]
    seen: dict[str, str] = {}
    for case in cases:
        if case.name in seen:
            raise TopsailError(f"{case.source}: case name {case.name!r} is also the name of {seen[case.name]}")
        seen[case.name] = case.source
    if unknown and strict:
        raise TopsailError(f"{shown}: unknown key(s) (strict_case_keys is set): {'; '.join(unknown)}")
    if unknown and warn:
        # attributed to the case file itself (``<file>:0: TgisCaseFileWarning: ...``), not to a line of our code
        warnings.warn_explicit(f"{len(unknown)} unknown key(s) ignored, as tgis-tester ignores them: "
                               f"{'; '.join(unknown)}", TgisCaseFileWarning, filename=shown, lineno=0)
    return cases


def parse_case(entry: Any, where: str, unknown: list[str] | None = None) -> TgisCase:
    """One case; the keys nobody knows are appended to ``unknown`` (``[2] (case 'x'): request.params.stoping``)."""
    unknown = [] if unknown is None else unknown
    if not isinstance(entry, dict):
        raise TopsailError(f"{where}: a case is a mapping (name, request, response or error), got {entry!r}")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TopsailError(f"{where}: name: every case needs a non-empty name")
    where = f"{where} (case {name!r})"
    label = where[where.rindex("["):]
    unknown += [f"{label}: {key}" for key in entry if key not in CASE_KEYS]
    if "response" in entry and "error" in entry:
        raise TopsailError(f"{where}: has both response and error; a case expects one of them")
    request = entry.get("request")
    if not isinstance(request, dict):
        raise TopsailError(f"{where}: request: a mapping with requests: [{{text}}] or request: {{text}} is required")
    unknown += [f"{label}: request.{key}" for key in request if key not in REQUEST_KEYS]
    texts, batched = _texts(request, f"{where}: request", f"{label}: request", unknown)
    params = request.get("params") or {}
    if not isinstance(params, dict):
        raise TopsailError(f"{where}: request.params: a mapping of TGIS parameters, got {params!r}")
    unknown += [f"{label}: request.params.{key}" for key in unknown_fields(params, pb.Parameters.DESCRIPTOR)]
    try:
        json_format.ParseDict(params, pb.Parameters(), ignore_unknown_fields=True)
    except json_format.ParseError as error:
        raise TopsailError(f"{where}: request.params: {error}") from None
    expected, stream_form = None, False
    if "response" in entry:
        stream_form = isinstance(entry["response"], list)
        if stream_form and batched:
            raise TopsailError(f"{where}: response: a list of stream messages is the streaming form, for a single "
                               "request (request: {text}); a batched request expects {responses: [...]}")
        expected = _expected(entry["response"], len(texts), where, f"{label}: response", unknown)
    return TgisCase(
        name=name.strip(), source=where, texts=texts, batched=batched, params=params,
        prefix_id=_optional_text(request, ("prefixId", "prefix_id"), f"{where}: request"),
        adapter_id=_optional_text(request, ("adapterId", "adapter_id"), f"{where}: request"),
        single_shard_only=_flag(entry, "single_shard_only", where), skip_check=_flag(entry, "skip_check", where),
        expected=expected, stream_form=stream_form,
        error=_error(entry["error"], where, f"{label}: error", unknown) if "error" in entry else None)


def unknown_fields(data: dict[str, Any], descriptor: Descriptor, prefix: str = "") -> list[str]:
    """The keys of protobuf JSON ``data`` that ``descriptor`` has no field for (camelCase or snake_case), nested."""
    found = []
    for key, value in data.items():
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        if field is None:
            found.append(f"{prefix}{key}")
        elif field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(value, dict):
            found += unknown_fields(value, field.message_type, f"{prefix}{key}.")
        elif field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    found += unknown_fields(item, field.message_type, f"{prefix}{key}[{index}].")
    return found


def _texts(request: dict[str, Any], where: str, label: str, unknown: list[str]) -> tuple[tuple[str, ...], bool]:
    if ("requests" in request) == ("request" in request):
        raise TopsailError(f"{where}: give either requests: [{{text}}] (batched) or request: {{text}} (single)")
    batched = "requests" in request
    items = request["requests"] if batched else [request["request"]]
    if not isinstance(items, list) or not items:
        raise TopsailError(f"{where}.requests: a non-empty list of {{text: ...}}")
    texts = []
    for index, item in enumerate(items):
        key = f"requests[{index}]" if batched else "request"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise TopsailError(f"{where}.{key}: expected {{text: <prompt>}}, got {item!r}")
        unknown += [f"{label}.{key}.{extra}" for extra in item if extra != "text"]
        texts.append(item["text"])
    return tuple(texts), batched


def _expected(response: Any, count: int, where: str, label: str, unknown: list[str]) -> tuple[dict[str, Any], ...]:
    """The unary expectation: ``{responses: [...]}`` as written, or the streaming form's messages merged."""
    messages: Any = response
    if isinstance(response, list):
        if len(messages) < 2:
            raise TopsailError(f"{where}: response: the streaming form lists GenerateStream's messages, at least "
                               f"2 (input info, then tokens); got {len(messages)}")
    else:
        messages = response.get("responses") if isinstance(response, dict) else None
        if not isinstance(messages, list):
            raise TopsailError(f"{where}: response: expected {{responses: [GenerationResponse, ...]}} or a list of "
                               "stream messages")
        unknown += [f"{label}.{key}" for key in response if key != "responses"]
        if len(messages) != count:
            raise TopsailError(f"{where}: response.responses: {len(messages)} responses for {count} request(s)")
    part = "response" if isinstance(response, list) else "response.responses"
    for index, item in enumerate(messages):
        if not isinstance(item, dict):
            raise TopsailError(f"{where}: {part}[{index}]: expected a GenerationResponse mapping, got {item!r}")
        unknown += [f"{label}[{index}].{key}" for key in unknown_fields(item, pb.GenerationResponse.DESCRIPTOR)]
        try:
            json_format.ParseDict(_json_floats(item), pb.GenerationResponse(), ignore_unknown_fields=True)
        except (json_format.ParseError, TypeError, AttributeError) as error:
            raise TopsailError(f"{where}: {part}[{index}]: {error}") from None
    if isinstance(response, list):
        return (merge_stream(messages),)
    return tuple(messages)


def _error(error: Any, where: str, label: str, unknown: list[str]) -> tuple[str, str]:
    if not isinstance(error, dict) or "code" not in error:
        raise TopsailError(f"{where}: error: expected {{code: <gRPC code name>, message: <text>}}, got {error!r}")
    unknown += [f"{label}.{key}" for key in error if key not in ("code", "message")]
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
