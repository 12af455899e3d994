"""tgis-tester's own file format end to end (a subprocess on the simulator, as a user runs it): single, batched and
streaming-form cases with extra keys and NaN logprobs, recorded, then judged with tgis-tester's tolerance."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
REFERENCE = {"deployment_framework": "tgis_native", "dtype_str": "float16"}
TOKEN_INFO = "{generatedTokens: true, inputTokens: true, tokenLogprobs: true, topNTokens: 2}"
CASES = f"""
# tgis-tester cases, made for this test; comments and key order must survive recording
- name: single
  single_shard_only: false
  note: an extra key tgis-tester ignores
  request:
    params: {{method: GREEDY, stopping: {{maxNewTokens: 6}}, response: {TOKEN_INFO}}}
    request: {{text: 'Once upon a time'}}
- name: batched-one
  request:
    params: {{method: SAMPLE, sampling: {{seed: 99, top_k: 5}}, stopping: {{maxNewTokens: 4, extra_limit: 3}}}}
    requests: [{{text: 'Hello there'}}]
- name: batched-two
  request:
    params: {{method: GREEDY, stopping: {{maxNewTokens: 4}}}}
    requests: [{{text: a}}, {{text: 'The capital of France is'}}]
"""


def run(tmp: Path, cases: str, *args: str) -> subprocess.CompletedProcess[str]:
    spec = [{"model": "google/flan-t5-small", "configs": [REFERENCE], "cases": [cases]}]
    command = [sys.executable, "-m", "pytest", "suites/tgis", "-p", "no:cacheprovider", "-q", "-rfs", "-W",
               "always::UserWarning", "--artifacts", str(tmp / "artifacts"), "--topsail-history",
               str(tmp / "history.sqlite"), "--var", "tests.tgis=" + json.dumps(spec), *args]
    # a run of its own, also when this test runs in an xdist worker (suites/tgis/settings.py warns only outside one)
    env = {key: value for key, value in os.environ.items()
           if key != "ARTIFACT_DIR" and not key.startswith("PYTEST_XDIST_")}
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def outcomes(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    found = {}
    for line in result.stdout.splitlines():
        match = re.match(r"^(PASSED|FAILED|SKIPPED|ERROR).*test_tgis\[flan-t5-small/[^/]+/(.+?)\]", line)
        if match:
            found[match[2]] = match[1]
    return found


def test_tgis_tester_files_record_twin_warn_and_judge_with_its_tolerance(tmp_path: Path) -> None:
    path = tmp_path / "product.yaml"
    path.write_text(textwrap.dedent(CASES).lstrip(), encoding="utf-8")

    recorded = run(tmp_path, str(path), "--tgis-record")
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-2000:]
    assert f"rewrote 1 case file(s) with the reference's answers:\n  {path}" in recorded.stdout
    text = path.read_text()
    assert text.startswith("# tgis-tester cases, made for this test") and "note: an extra key" in text
    cases = yaml.safe_load(text)
    assert [list(case) for case in cases][0] == ["name", "single_shard_only", "note", "request", "response"]
    assert cases[1]["response"]["responses"][0]["seed"] == 99  # an integer, as tgis-tester writes it
    assert math.isnan(cases[0]["response"]["responses"][0]["inputTokens"][0]["logprob"])  # TGIS: first input token

    plain = run(tmp_path, str(path), "-rA")
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-2000:]
    assert outcomes(plain) == {"single": "PASSED", "single/stream": "PASSED", "batched-one": "PASSED",
                               "batched-one/stream": "PASSED", "batched-two": "PASSED"}
    warned = [line for line in plain.stderr.splitlines() + plain.stdout.splitlines() if "TgisCaseFileWarning" in line]
    assert len(warned) == 1, plain.stderr[-2000:]
    assert warned[0].startswith(f"{path}:0: TgisCaseFileWarning: 2 unknown key(s) ignored")
    assert "[0] (case 'single'): note" in warned[0] and "request.params.stopping.extra_limit" in warned[0]

    for token in cases[0]["response"]["responses"][0]["tokens"]:  # noise within tgis-tester's abs 5.0
        token["logprob"] -= 3.5
        for top in token.get("topTokens", []):
            top["logprob"] -= 4.0
    path.write_text(yaml.safe_dump(cases, sort_keys=False, allow_unicode=True))
    noisy = run(tmp_path, str(path), "-rA")
    assert noisy.returncode == 0, noisy.stdout[-3000:]
    assert outcomes(noisy)["single"] == "PASSED" and outcomes(noisy)["single/stream"] == "PASSED"

    changed = cases[0]["response"]["responses"][0]["tokens"][1]
    changed["text"] = changed["text"] + "x"
    path.write_text(yaml.safe_dump(cases, sort_keys=False, allow_unicode=True))
    diverged = run(tmp_path, str(path), "-rA")
    assert diverged.returncode == 1, diverged.stdout[-4000:]
    assert outcomes(diverged) == {"single": "FAILED", "single/stream": "FAILED", "batched-one": "PASSED",
                                 "batched-one/stream": "PASSED", "batched-two": "PASSED"}, diverged.stdout[-4000:]
    assert f"responses[0].tokens[1].text: expected {changed['text']!r}" in diverged.stdout
    assert f"stream (merged) responses[0].tokens[1].text: expected {changed['text']!r}" in diverged.stdout


def test_streaming_form_case_is_accepted_and_judged_twice(tmp_path: Path) -> None:
    """tgis-tester's streaming form (request: {text} with response: [stream messages]): recorded by its stream item,
    then a unary item (against the merged messages) and a stream item."""
    path = tmp_path / "stream.yaml"
    path.write_text(textwrap.dedent("""
        - name: streamed
          request:
            params: {method: GREEDY, stopping: {maxNewTokens: 5}, response: {generatedTokens: true}}
            request: {text: 'Tell me a story'}
          response:
          - {inputTokenCount: 1}
          - {generatedTokenCount: 1, text: placeholder, stopReason: MAX_TOKENS}
        """).lstrip(), encoding="utf-8")
    recorded = run(tmp_path, str(path), "--tgis-record", "-rA")
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-2000:]
    assert outcomes(recorded) == {"streamed/stream": "PASSED"}  # the stream item records, the unary one skips
    assert "1 passed, 1 skipped" in recorded.stdout and "recorded by its streaming item" in recorded.stdout
    messages = yaml.safe_load(path.read_text())[0]["response"]
    assert isinstance(messages, list) and len(messages) >= 3 and messages[-1]["stopReason"] == "MAX_TOKENS"
    judged = run(tmp_path, str(path), "-rA")
    assert judged.returncode == 0, judged.stdout[-3000:]
    assert outcomes(judged) == {"streamed": "PASSED", "streamed/stream": "PASSED"}
