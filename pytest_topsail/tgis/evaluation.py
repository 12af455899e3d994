"""Evaluation of TGIS answers against a case's expectation, as tgis-tester judges them, with a field-level diff.

- ``approx_equality`` (default): exact on input/generated token counts, text, stop reason, stop sequence, seed and
  token texts; token logprobs within a relative tolerance (default 5e-4, TGIS's own tests); NaN equals NaN.
- ``exact_text_match``: the text only.
- Streaming (GenerateStream) follows TGIS's rules (``stream_problems``) and, merged (``merge_stream``), must equal
  the unary expectation.
Responses are compared in protobuf JSON form (camelCase keys, enum names), missing fields read as their defaults.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from pytest_topsail.tgis import generation_pb2 as pb

STRATEGIES = ("approx_equality", "exact_text_match")
DEFAULT_REL_TOLERANCE = 5e-4
EXACT_FIELDS = ("inputTokenCount", "generatedTokenCount", "text", "stopReason", "stopSequence", "seed")
DEFAULTS: dict[str, Any] = {"inputTokenCount": 0, "generatedTokenCount": 0, "text": "", "stopReason": "NOT_FINISHED",
                            "stopSequence": "", "seed": 0}


@dataclass(frozen=True)
class Difference:
    index: int  # which response of the batch
    path: str  # "tokens[3].logprob"
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"responses[{self.index}].{self.path}: expected {self.expected!r}, got {self.actual!r}"


def response_dict(message: pb.GenerationResponse) -> dict[str, Any]:
    """A response in the JSON form case files use (what ``--tgis-record`` writes)."""
    return json_format.MessageToDict(message)


def compare(expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]],
            strategy: str = "approx_equality", rel_tolerance: float = DEFAULT_REL_TOLERANCE) -> list[Difference]:
    """Every field that differs, response by response."""
    if len(expected) != len(actual):
        return [Difference(-1, "responses (count)", len(expected), len(actual))]
    differences: list[Difference] = []
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if strategy == "exact_text_match":
            fields: Iterable[str] = ("text",)
        else:
            fields = EXACT_FIELDS
        for name in fields:
            wanted, found = _field(want, name), _field(got, name)
            if wanted != found:
                differences.append(Difference(index, name, wanted, found))
        if strategy == "approx_equality":
            for key in ("tokens", "inputTokens"):
                differences += _token_differences(index, key, want.get(key) or [], got.get(key) or [], rel_tolerance)
    return differences


def _field(response: Mapping[str, Any], name: str) -> Any:
    value = response.get(name, DEFAULTS[name])
    if name in ("inputTokenCount", "generatedTokenCount", "seed"):
        return int(value)  # protobuf JSON writes uint64 as a string
    return value


def _token_differences(index: int, key: str, want: Sequence[Mapping[str, Any]], got: Sequence[Mapping[str, Any]],
                       rel_tolerance: float) -> list[Difference]:
    if len(want) != len(got):
        return [Difference(index, f"{key} (count)", len(want), len(got))]
    differences = []
    for position, (expected, actual) in enumerate(zip(want, got, strict=True)):
        path = f"{key}[{position}]"
        if expected.get("text", "") != actual.get("text", ""):
            differences.append(Difference(index, f"{path}.text", expected.get("text", ""), actual.get("text", "")))
        if "logprob" in expected and not close(expected["logprob"], actual.get("logprob"), rel_tolerance):
            differences.append(Difference(index, f"{path}.logprob", expected["logprob"], actual.get("logprob")))
        want_top, got_top = expected.get("topTokens") or [], actual.get("topTokens") or []
        if [t.get("text", "") for t in want_top] != [t.get("text", "") for t in got_top]:
            differences.append(Difference(index, f"{path}.topTokens (texts)", [t.get("text", "") for t in want_top],
                                          [t.get("text", "") for t in got_top]))
    return differences


def close(expected: Any, actual: Any, rel_tolerance: float) -> bool:
    """Equal within ``rel_tolerance``; NaN equals NaN (the first input token's logprob is NaN in TGIS)."""
    if actual is None:
        return False
    want, got = float(expected), float(actual)
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    return math.isclose(want, got, rel_tol=rel_tolerance, abs_tol=1e-9)


def stream_problems(messages: Sequence[pb.GenerationResponse]) -> list[str]:
    """What breaks TGIS's streaming rules: at least two messages; the first carries the input token count and no
    generated token; the last the stop reason; the generated token count never decreases."""
    if len(messages) < 2:
        return [f"stream: {len(messages)} message(s), at least 2 expected (input info, then tokens)"]
    problems = []
    first, last = messages[0], messages[-1]
    if first.input_token_count <= 0 or first.generated_token_count != 0:
        problems.append(f"stream: first message has input_token_count {first.input_token_count} and "
                        f"generated_token_count {first.generated_token_count} (expected > 0 and 0)")
    if last.stop_reason == pb.StopReason.NOT_FINISHED:
        problems.append("stream: the last message carries no stop reason (NOT_FINISHED)")
    for position, message in enumerate(messages[:-1]):
        if message.stop_reason != pb.StopReason.NOT_FINISHED:
            problems.append(f"stream: message {position} has stop reason {pb.StopReason.Name(message.stop_reason)} "
                            "before the end")
            break
    counts = [message.generated_token_count for message in messages]
    if any(later < earlier for earlier, later in zip(counts, counts[1:], strict=False)):
        problems.append(f"stream: generated_token_count decreases: {counts}")
    return problems


def merge_stream(messages: Sequence[pb.GenerationResponse]) -> dict[str, Any]:
    """The stream's messages as one response (text and tokens concatenated, counts and stop reason of the end)."""
    merged = pb.GenerationResponse()
    for message in messages:
        merged.text += message.text
        merged.tokens.extend(message.tokens)
        merged.input_tokens.extend(message.input_tokens)
        merged.input_token_count = merged.input_token_count or message.input_token_count
        merged.generated_token_count = message.generated_token_count or merged.generated_token_count
        merged.seed = message.seed or merged.seed
        if message.stop_reason != pb.StopReason.NOT_FINISHED:
            merged.stop_reason = message.stop_reason
            merged.stop_sequence = message.stop_sequence
    return response_dict(merged)


def describe(differences: Sequence[Difference], limit: int = 20) -> str:
    lines = [str(difference) for difference in differences[:limit]]
    if len(differences) > limit:
        lines.append(f"... and {len(differences) - limit} more differences")
    return "\n".join(lines)
