"""tgis-tester case files as tgis-tester reads them: single, batched and streaming forms, NaN logprobs, extra keys
warned once per file (refused with strict), and evaluation as tgis-tester's ApproxEquality and streaming rules."""

from __future__ import annotations

import math
import textwrap
import warnings
from pathlib import Path

import pytest
import yaml

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis.casefile import TgisCaseFileWarning, load_case_file
from pytest_topsail.tgis.evaluation import Tolerance, compare, merge_stream, stream_problems
from pytest_topsail.tgis.recording import splice_expectation

CASES = """
# written for tgis-tester
- name: single
  request:
    params: {method: GREEDY, stopping: {maxNewTokens: 2}, response: {generatedTokens: true, tokenLogprobs: true,
             topNTokens: 2}}
    request: {text: 'Once upon a time'}
  response:
    responses:
    - inputTokenCount: 4
      generatedTokenCount: 2
      text: ' there was'
      stopReason: MAX_TOKENS
      seed: 99
      tokens:
      - {text: ▁there, logprob: -0.5, topTokens: [{text: ▁there, logprob: -0.5}, {text: ▁a, logprob: -2.0}]}
      - {text: ▁was, logprob: .nan}
- name: batched
  description: not a tgis-tester key
  request:
    params: {stopping: {maxNewTokens: 2, stoping: 1}, sampling: {top_k: 5}}
    requests: [{text: a}, {text: b}]
  response: {responses: [{inputTokenCount: 1, text: x}, {inputTokenCount: 1, text: y}]}
- name: streamed
  request: {request: {text: hi}}
  response:
  - {inputTokenCount: 1}
  - {generatedTokenCount: 1, text: ' a'}
  - {generatedTokenCount: 2, text: ' b', stopReason: MAX_TOKENS}
- name: refused
  request: {requests: [{text: hi}]}
  error: {code: INVALID_ARGUMENT, message: refused, details: extra}
"""


def write(tmp_path: Path, text: str = CASES) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_every_form_is_read_and_extra_keys_warn_once_naming_file_and_keys(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cases = {case.name: case for case in load_case_file(write(tmp_path), "cases.yaml")}
    found = [w for w in caught if issubclass(w.category, TgisCaseFileWarning)]
    assert len(found) == 1 and found[0].filename == "cases.yaml", found
    messages = [str(found[0].message)]
    assert messages[0].startswith("3 unknown key(s) ignored, as tgis-tester ignores them: ")
    for key in ("[1] (case 'batched'): description", "request.params.stopping.stoping", "[3] (case 'refused'): "
                "error.details"):
        assert key in messages[0]
    assert cases["single"].streamable and not cases["single"].batched
    assert math.isnan(cases["single"].expected[0]["tokens"][1]["logprob"])
    assert cases["single"].expected[0]["seed"] == 99
    assert not cases["batched"].streamable  # two texts
    assert cases["streamed"].stream_form and cases["streamed"].streamable
    assert cases["streamed"].expected == ({"inputTokenCount": 1, "generatedTokenCount": 2, "text": " a b",
                                           "stopReason": "MAX_TOKENS"},)
    assert not cases["refused"].streamable and cases["refused"].error == ("INVALID_ARGUMENT", "refused")


def test_strict_refuses_extra_keys_naming_them(tmp_path: Path) -> None:
    with pytest.raises(TopsailError, match=r"cases.yaml: unknown key\(s\) \(strict_case_keys is set\): .*description"):
        load_case_file(write(tmp_path), "cases.yaml", strict=True)


def test_streaming_form_needs_a_single_request(tmp_path: Path) -> None:
    path = write(tmp_path, "- name: x\n  request: {requests: [{text: a}]}\n  response: [{inputTokenCount: 1}, {}]\n")
    with pytest.raises(TopsailError, match=r"\[0\] \(case 'x'\): response: a list of stream messages is the "
                                           "streaming form"):
        load_case_file(path, "cases.yaml")


def expected_single(tmp_path: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dict(load_case_file(write(tmp_path), "cases.yaml")[0].expected[0])


def test_logprob_noise_within_tgis_testers_tolerance_passes_top_tokens_included(tmp_path: Path) -> None:
    want = expected_single(tmp_path)
    got = yaml.safe_load(yaml.safe_dump(want))
    got["tokens"][0]["logprob"] -= 4.9
    got["tokens"][0]["topTokens"][1]["logprob"] += 4.5
    assert compare([want], [got]) == []
    got["tokens"][0]["topTokens"][1]["logprob"] = -9.0  # 7.0 apart: beyond abs 5.0, within rel 5.0 x 9.0
    assert compare([want], [got]) == []
    tight = Tolerance(abs=0.01, rel=0.0005)
    assert [str(d) for d in compare([want], [got], tolerance=tight)] == [
        "responses[0].tokens[0].logprob: expected -0.5, got -5.4",
        "responses[0].tokens[0].topTokens[1].logprob: expected -2.0, got -9.0"]


def test_a_changed_token_text_fails_naming_the_field(tmp_path: Path) -> None:
    want = expected_single(tmp_path)
    got = yaml.safe_load(yaml.safe_dump(want))
    got["tokens"][1]["text"] = "▁is"
    got["tokens"][0]["topTokens"][0]["text"] = "▁here"
    assert [str(d) for d in compare([want], [got])] == [
        "responses[0].tokens[0].topTokens[0].text: expected '▁there', got '▁here'",
        "responses[0].tokens[1].text: expected '▁was', got '▁is'"]


def test_nan_equals_nan_only() -> None:
    want = {"text": "x", "tokens": [{"text": "a", "logprob": float("nan")}]}
    assert compare([want], [{"text": "x", "tokens": [{"text": "a", "logprob": float("nan")}]}]) == []
    assert [d.path for d in compare([want], [{"text": "x", "tokens": [{"text": "a", "logprob": -1.0}]}])] == [
        "tokens[0].logprob"]


def test_streaming_rules_and_merge() -> None:
    expected = {"inputTokenCount": 2, "generatedTokenCount": 2, "text": " a b", "stopReason": "MAX_TOKENS",
                "seed": 7}
    good = [{"inputTokenCount": 2}, {"generatedTokenCount": 1, "text": " a"},
            {"generatedTokenCount": 2, "text": " b", "stopReason": "MAX_TOKENS", "seed": 7}]
    params = {"sampling": {"seed": 7}}
    assert stream_problems(good, expected, params) == []
    assert compare([expected], [merge_stream(good)]) == []
    bad = [good[1], good[0], {**good[2], "stopReason": "EOS_TOKEN", "seed": 8}]
    problems = stream_problems(bad, expected, params)
    assert any(p.startswith("stream: message 0 has inputTokenCount 0") for p in problems)
    assert "stream: last message stopReason: expected 'MAX_TOKENS', got 'EOS_TOKEN'" in problems
    assert "stream: last message seed: expected 7, got 8" in problems
    assert "stream: generatedTokenCount decreases: [1, 0, 2]" in problems
    assert stream_problems(good[:1], expected, params) == [
        "stream: 1 message(s), at least 2 expected (input info, then tokens)"]


def test_recording_rewrites_only_the_expectation_keeping_comments_and_types(tmp_path: Path) -> None:
    original = write(tmp_path).read_text()
    text = splice_expectation(original, 0, "response", {"responses": [{"text": " new", "seed": 99,
                                                                        "tokens": [{"logprob": float("nan")}]}]})
    assert text is not None and text.startswith("# written for tgis-tester\n")
    assert "seed: 99\n" in text and "logprob: .nan" in text and "seed: '99'" not in text
    after = yaml.safe_load(text)
    before = yaml.safe_load(original)
    assert after[0]["response"]["responses"][0]["text"] == " new" and after[1:] == before[1:]
    assert text.split("- name: batched", 1)[1] == original.split("- name: batched", 1)[1]  # untouched after
    error = splice_expectation(original, 2, "error", {"code": "INVALID_ARGUMENT", "message": "m"})
    assert error is not None and "response" not in yaml.safe_load(error)[2]
    assert yaml.safe_load(error)[2]["error"] == {"code": "INVALID_ARGUMENT", "message": "m"}
