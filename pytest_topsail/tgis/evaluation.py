"""Evaluation of TGIS answers against a case's expectation, as tgis-tester judges them, with a field-level diff.

- ``approx_equality`` (default): exact on input/generated token counts, text, stop reason, stop sequence, seed and
  token texts (generated, input and top tokens); token and top-token logprobs approximately equal: within an absolute
  or a relative tolerance (tgis-tester's ApproxEquality defaults: abs 5.0, rel 5.0); NaN equals NaN.
- ``exact_text_match``: the text only.
- Streaming (GenerateStream) follows tgis-tester's rules (``stream_problems``) and, merged (``merge_stream``), must
  equal the unary expectation.
Responses are compared in protobuf JSON form (camelCase keys, enum names), missing fields read as their defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from pytest_topsail.tgis import generation_pb2 as pb

STRATEGIES = ("approx_equality", "exact_text_match")
DEFAULT_ABS_TOLERANCE = 5.0  # tgis-tester's ApproxEquality
DEFAULT_REL_TOLERANCE = 5.0
EXACT_FIELDS = ("inputTokenCount", "generatedTokenCount", "text", "stopReason", "stopSequence", "seed")
DEFAULTS: dict[str, Any] = {"inputTokenCount": 0, "generatedTokenCount": 0, "text": "", "stopReason": "NOT_FINISHED",
                            "stopSequence": "", "seed": 0}
_INTEGER_FIELDS = ("inputTokenCount", "generatedTokenCount", "seed")


@dataclass(frozen=True)
class Tolerance:
    """Two logprobs are equal when they differ by at most ``abs`` or by at most ``rel`` times the larger one."""

    abs: float = DEFAULT_ABS_TOLERANCE
    rel: float = DEFAULT_REL_TOLERANCE


@dataclass(frozen=True)
class Difference:
    index: int  # which response of the batch
    path: str  # "tokens[3].logprob"
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"responses[{self.index}].{self.path}: expected {self.expected!r}, got {self.actual!r}"


def response_dict(message: pb.GenerationResponse) -> dict[str, Any]:
    """A response in the JSON form case files use (what ``--tgis-record`` writes), typed as tgis-tester's files are:
    the seed an integer (protobuf JSON writes a uint64 as a string), a NaN logprob a float (YAML ``.nan``, not the
    string ``NaN``)."""
    data = json_format.MessageToDict(message)
    if "seed" in data:
        data["seed"] = int(data["seed"])
    for token in [*data.get("tokens", ()), *data.get("inputTokens", ())]:
        for info in [token, *token.get("topTokens", ())]:
            if isinstance(info.get("logprob"), str):
                info["logprob"] = float(info["logprob"])  # "NaN", "Infinity", "-Infinity"
    return data


def compare(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]],
            strategy: str = "approx_equality", tolerance: Tolerance = Tolerance()) -> list[Difference]:
    """Every field that differs, response by response."""
    if len(expected) != len(actual):
        return [Difference(-1, "responses (count)", len(expected), len(actual))]
    differences: list[Difference] = []
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        fields = ("text",) if strategy == "exact_text_match" else EXACT_FIELDS
        for name in fields:
            wanted, found = _field(want, name), _field(got, name)
            if wanted != found:
                differences.append(Difference(index, name, wanted, found))
        if strategy == "approx_equality":
            for key in ("tokens", "inputTokens"):
                differences += _token_differences(index, key, want.get(key) or [], got.get(key) or [], tolerance)
    return differences


def _field(response: Mapping[str, Any], name: str) -> Any:
    value = response.get(name, DEFAULTS[name])
    return int(value) if name in _INTEGER_FIELDS else value


def _token_differences(index: int, key: str, want: Sequence[Mapping[str, Any]], got: Sequence[Mapping[str, Any]],
                       tolerance: Tolerance) -> list[Difference]:
    if len(want) != len(got):
        return [Difference(index, f"{key} (count)", len(want), len(got))]
    differences = []
    for position, (expected, actual) in enumerate(zip(want, got, strict=True)):
        path = f"{key}[{position}]"
        differences += _text_and_logprob(index, path, expected, actual, tolerance)
        want_top, got_top = expected.get("topTokens") or [], actual.get("topTokens") or []
        if len(want_top) != len(got_top):
            differences.append(Difference(index, f"{path}.topTokens (count)", len(want_top), len(got_top)))
            continue
        for rank, (top_expected, top_actual) in enumerate(zip(want_top, got_top, strict=True)):
            differences += _text_and_logprob(index, f"{path}.topTokens[{rank}]", top_expected, top_actual, tolerance)
    return differences


def _text_and_logprob(index: int, path: str, expected: Mapping[str, Any], actual: Mapping[str, Any],
                      tolerance: Tolerance) -> list[Difference]:
    differences = []
    if expected.get("text", "") != actual.get("text", ""):
        differences.append(Difference(index, f"{path}.text", expected.get("text", ""), actual.get("text", "")))
    if "logprob" in expected and not close(expected["logprob"], actual.get("logprob", 0.0), tolerance):
        differences.append(Difference(index, f"{path}.logprob", expected["logprob"], actual.get("logprob", 0.0)))
    return differences


def close(expected: Any, actual: Any, tolerance: Tolerance = Tolerance()) -> bool:
    """Approximately equal (see Tolerance); NaN equals NaN (the first input token's logprob is NaN in TGIS)."""
    want, got = float(expected), float(actual)
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if want == got:
        return True
    difference = abs(want - got)
    return difference <= tolerance.abs or difference <= max(abs(want), abs(got)) * tolerance.rel


def stream_problems(messages: Sequence[Mapping[str, Any]], expected: Mapping[str, Any] | None,
                    params: Mapping[str, Any]) -> list[str]:
    """What breaks tgis-tester's streaming rules: at least two messages; the first carries the input token count (and
    the input text when asked for), no generated token and no stop reason; when input tokens are asked for, the second
    carries them only; the last carries the expected stop reason, generated token count (and seed, when the request
    set one); the generated token count never decreases."""
    if len(messages) < 2:
        return [f"stream: {len(messages)} message(s), at least 2 expected (input info, then tokens)"]
    response = _options(params, "response")
    problems = []
    first, second, last = messages[0], messages[1], messages[-1]
    if int(first.get("inputTokenCount", 0)) <= 0 or int(first.get("generatedTokenCount", 0)) != 0 \
            or first.get("stopReason", "NOT_FINISHED") != "NOT_FINISHED":
        problems.append(f"stream: message 0 has inputTokenCount {first.get('inputTokenCount', 0)}, "
                        f"generatedTokenCount {first.get('generatedTokenCount', 0)}, stopReason "
                        f"{first.get('stopReason', 'NOT_FINISHED')} (expected > 0, 0 and none)")
    if response.get("inputText") and not first.get("text"):
        problems.append("stream: message 0 carries no input text although params.response.inputText is set")
    if response.get("inputTokens") and (int(second.get("generatedTokenCount", 0)) != 0 or not second.get(
            "inputTokens") or second.get("text") or second.get("stopReason", "NOT_FINISHED") != "NOT_FINISHED"):
        problems.append("stream: message 1 must carry the input tokens only (params.response.inputTokens is set)")
    for position, message in enumerate(messages[:-1]):
        if message.get("stopReason", "NOT_FINISHED") != "NOT_FINISHED":
            problems.append(f"stream: message {position} has stopReason {message['stopReason']} before the end")
            break
    if expected is not None:
        for name in ("stopReason", "generatedTokenCount"):
            if _field(last, name) != _field(expected, name):
                problems.append(f"stream: last message {name}: expected {_field(expected, name)!r}, "
                                f"got {_field(last, name)!r}")
        seed = _options(params, "sampling").get("seed")
        if seed is not None and _field(last, "seed") != int(seed):
            problems.append(f"stream: last message seed: expected {int(seed)}, got {_field(last, 'seed')}")
    elif last.get("stopReason", "NOT_FINISHED") == "NOT_FINISHED":
        problems.append("stream: the last message carries no stop reason (NOT_FINISHED)")
    counts = [int(message.get("generatedTokenCount", 0)) for message in messages]
    if any(later < earlier for earlier, later in zip(counts, counts[1:], strict=False)):
        problems.append(f"stream: generatedTokenCount decreases: {counts}")
    return problems


def _options(params: Mapping[str, Any], block: str) -> dict[str, Any]:
    """A block of the request's params with camelCase keys (case files mix camelCase and snake_case)."""
    options = params.get(block) or {}
    return {_camel(key): value for key, value in options.items()} if isinstance(options, Mapping) else {}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def merge_stream(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The stream's messages (JSON form) as one response: text and tokens concatenated, the input token count of the
    first, the counts, stop reason, stop sequence and seed of the last, as tgis-tester merges them."""
    merged: dict[str, Any] = {}
    text = "".join(str(message.get("text", "")) for message in messages)
    tokens = [token for message in messages for token in message.get("tokens") or []]
    input_tokens = [token for message in messages for token in message.get("inputTokens") or []]
    if messages:
        merged["inputTokenCount"] = messages[0].get("inputTokenCount", 0)
        last = messages[-1]
        for name in ("generatedTokenCount", "stopReason", "stopSequence", "seed"):
            if name in last:
                merged[name] = last[name]
    if text:
        merged["text"] = text
    if tokens:
        merged["tokens"] = tokens
    if input_tokens:
        merged["inputTokens"] = input_tokens
    return merged

