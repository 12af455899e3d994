"""Multi-turn conversations (llmload/multi_turn.py): a ShareGPT file or synthetic turns, each turn's prompt carrying
the earlier turns and answers; the closed loop gives each user one conversation at a time, its turns in order with a
think time between them; the summary has statistics per turn index."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import load_dataset, parse_entry, prompt_entry, write_dataset
from pytest_topsail.llmload.records import read_records
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.llmload.settings import case_load_settings
from tests.llmload.test_llm_load_suite import item_dirs, run_pytest

SHAREGPT = [
    {"id": "a", "conversations": [
        {"from": "system", "value": "be brief"},
        {"from": "human", "value": "what is a GPU"}, {"from": "gpt", "value": "a processor of many small cores"},
        {"from": "human", "value": "and a TPU"}, {"from": "gpt", "value": "a matrix unit"},
        {"from": "human", "value": "thanks"}]},  # the last message is not answered: no turn
    {"id": "b", "conversations": [{"from": "gpt", "value": "hello"}]},  # answers nothing: skipped
    {"id": "c", "conversations": [
        {"from": "human", "value": "one"}, {"from": "human", "value": "two"}, {"from": "gpt", "value": "three four"}]},
]


def settings(**values: Any) -> Any:
    return case_load_settings({"model": "m", "concurrency": 1, "requests": 4, "dataset": "multi-turn", **values},
                              "case x", {})


def test_a_sharegpt_file_becomes_turns_carrying_their_history(tmp_path: Path) -> None:
    (tmp_path / "chats.json").write_text(json.dumps(SHAREGPT))
    prompts = settings(multi_turn={"file": "chats.json"}).prompts(tmp_path)
    assert [(p.turn, p.text, p.history) for p in prompts] == [
        (1, "what is a GPU", ()),
        (2, "and a TPU", ("what is a GPU", "a processor of many small cores")),
        (1, "one\ntwo", ())]
    assert prompts[0].system_prompt == "be brief" and prompts[1].output_tokens == 3  # "a matrix unit"
    assert prompts[1].full_text() == "be brief\nwhat is a GPU\na processor of many small cores\nand a TPU"
    assert [m["role"] for m in prompts[1].messages()] == ["system", "user", "assistant", "user"]
    assert prompts[1].input_tokens > prompts[0].input_tokens
    limited = settings(multi_turn={"file": "chats.json", "turns": 1, "conversations": 1}).prompts(tmp_path)
    assert [p.text for p in limited] == ["what is a GPU"]


@pytest.mark.parametrize(("content", "message"), [
    ("{}", "expected a list of conversations"),
    ("[{\"conversations\": [{\"from\": \"human\"}]}]", "conversation 0: message 0 needs string 'from' and 'value'"),
    ("[{\"conversations\": [{\"from\": \"robot\", \"value\": \"x\"}]}]", "unknown 'from' 'robot'"),
    ("[{\"items\": []}]", "conversation 0: needs a 'conversations' list"),
    ("[{\"conversations\": []}]", "no conversation has a human message answered"),
    ("not json", "not a JSON file"),
])
def test_a_bad_sharegpt_file_is_named(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "chats.json").write_text(content)
    with pytest.raises(TopsailError, match="multi-turn dataset .*chats.json") as error:
        settings(multi_turn={"file": "chats.json"}).prompts(tmp_path)
    assert message in str(error.value)


def test_synthetic_turns_extend_the_previous_prompt() -> None:
    prompts = settings(multi_turn={"conversations": 3, "turns": 4, "input_tokens": 8,
                                   "output_tokens": 5}).prompts(".")
    assert [p.turn for p in prompts] == [1, 2, 3, 4] * 3
    for before, after in zip(prompts, prompts[1:], strict=False):
        if after.turn > 1:  # the previous turn's whole prompt, then its answer, then the new message
            assert after.full_text().startswith(before.full_text() + "\n")
            assert after.input_tokens == before.input_tokens + 5 + 8 + 2  # answer, message, two newlines
            assert len(after.history) == 2 * (after.turn - 1)


@pytest.mark.parametrize(("values", "message"), [
    ({"multi_turn": {"turns": 2}}, "give a ShareGPT file, or the synthetic conversations' conversations"),
    ({"multi_turn": {"file": "x.json", "input_tokens": 3}}, "input_tokens and output_tokens go without file"),
    ({"multi_turn": {"file": "x.json"}, "max_prompts": 3}, "max_prompts would cut them"),
    ({"multi_turn": {"file": "x.json"}, "mode": "constant", "rate": 2, "concurrency": None}, "closed loop"),
    ({}, "dataset: multi-turn and the multi_turn"),
])
def test_bad_multi_turn_settings_are_named(values: dict[str, Any], message: str) -> None:
    with pytest.raises(TopsailError, match="case x") as error:
        settings(**values)
    assert message in str(error.value)


def test_users_hold_conversations_in_order_with_think_time(fake_server, tmp_path: Path) -> None:
    fake_server.prefill_s = 0.01
    case = settings(multi_turn={"conversations": 4, "turns": 3, "input_tokens": 4, "output_tokens": 2,
                                "think_time_s": 0.1}, concurrency=2, requests=12)
    backend = OpenAIBackend(fake_server.url, "m", api="chat")
    [summary] = run_load_test(backend, case.prompts("."), [case.load_point()], tmp_path)
    assert summary["succeeded"] == 12 and case.load_point().think_time_s == 0.1
    assert sorted(len(body["messages"]) for body in fake_server.requests) == [1] * 4 + [3] * 4 + [5] * 4
    by_user: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in read_records(tmp_path / "records.jsonl"):
        by_user[record["user"]].append(record)
    for records in by_user.values():
        records.sort(key=lambda r: r["start"])
        assert [r["turn"] for r in records] == [1, 2, 3] * (len(records) // 3)
        for before, after in zip(records, records[1:], strict=False):
            if after["turn"] > 1:
                assert after["start"] - before["end"] >= 0.1  # the user thought before its next turn
    turns = summary["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3] and all(t["requests"] == 4 for t in turns)


def test_the_multi_turn_preset_grows_ttft_with_history_unless_the_prefix_is_cached(tmp_path: Path) -> None:
    """``--preset multi-turn`` as a user runs it (the reference server in-process, the simulated vLLM's scheduler):
    without prefix caching TTFT grows turn after turn with the history; with it, it stays near the first turn's, the
    server's prefix-cache hit rate is the share of the prompt tokens the previous turn already sent, and per turn
    (its usage's cached tokens) that share rises."""
    result = run_pytest(tmp_path, "artifacts", "-m", "llm_load", "--preset", "multi-turn", "-q",
                        "--var", "tests.llm_load.serving=in-process")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    items = {}
    for directory in item_dirs(tmp_path / "artifacts"):
        cached = directory.name.endswith("enable_prefix_caching=true")
        items[cached] = (json.loads((directory / "load" / "summary.json").read_text())[0],
                         {k["name"]: k["value"] for k in json.loads((directory / "kpis.json").read_text())})
    assert sorted(items) == [False, True]
    for cached, (summary, kpis) in items.items():
        turns = summary["turns"]
        assert [t["turn"] for t in turns] == [1, 2, 3, 4] and summary["failures"] == {}
        inputs = [kpis[f"turn{k}_input_tokens"] for k in (1, 2, 3, 4)]
        assert inputs == sorted(inputs) and inputs[3] > 4 * inputs[0]  # the history grows the input
        ttft = [kpis[f"turn{k}_ttft_median_ms"] for k in (1, 2, 3, 4)]
        if cached:
            shared = sum(inputs[:3]) / sum(inputs)  # each turn after the first resends the previous turn's prompt
            assert abs(kpis["server_prefix_cache_hit_rate"] - 100 * shared) <= 5, (kpis, shared)
            # per turn, as the server's usage says it: the previous turn's prompt, a growing share of the next
            hits = [kpis[f"turn{k}_cached_share"] for k in (1, 2, 3, 4)]
            assert hits[0] == 0 and hits == sorted(hits), hits
            for turn in (2, 3, 4):
                assert abs(hits[turn - 1] - inputs[turn - 2] / inputs[turn - 1]) <= 0.05, (hits, inputs)
        else:
            assert ttft[3] > 1.5 * ttft[0], ttft
            assert kpis.get("server_prefix_cache_hit_rate") in (None, 0) and "turn2_cached_share" not in kpis
    cached_ttft, uncached_ttft = items[True][1]["turn4_ttft_median_ms"], items[False][1]["turn4_ttft_median_ms"]
    assert cached_ttft < uncached_ttft


def test_conversations_reach_generator_pods_whole(tmp_path: Path) -> None:
    """The prompts file of the generator pods' ConfigMap (distributed.py) and a saved dataset keep each turn's
    history and turn (a pod otherwise sends every turn without its history)."""
    prompts = settings(multi_turn={"conversations": 2, "turns": 3, "input_tokens": 4, "output_tokens": 2}).prompts(".")
    write_dataset(prompts, tmp_path / "prompts.jsonl")
    assert load_dataset(tmp_path / "prompts.jsonl") == prompts
    assert [parse_entry(prompt_entry(p), "x") for p in prompts] == prompts
