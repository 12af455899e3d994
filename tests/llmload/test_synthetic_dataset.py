"""Synthetic prompts of a token length distribution (our toy tokenizer, or a tokenizer file) and llm-load-test's
dataset length filters, as a case gives them."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.generator import LoadPoint
from pytest_topsail.llmload.records import read_records
from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.llmload.settings import LoadSettings, case_load_settings
from pytest_topsail.tgis.serving import ModelServer
from pytest_topsail.tgis.tokenizer import tokenize

MODEL = "bigscience/bloom-560m"


def settings(**values: Any) -> LoadSettings:
    return case_load_settings({"model": MODEL, "concurrency": 1, "requests": 4, **values}, "case x", {})


def test_synthetic_prompts_follow_the_distribution_in_toy_tokens(tmp_path: Path) -> None:
    case = settings(dataset="synthetic", seed=3, synthetic={
        "prompts": 300, "input_tokens": {"mean": 60, "stdev": 15, "min": 30, "max": 90}, "output_tokens": 16})
    prompts = case.prompts(tmp_path)
    assert len(prompts) == 300 and {p.output_tokens for p in prompts} == {16}
    lengths = [p.input_tokens for p in prompts]
    assert all(len(tokenize(p.text)) == p.input_tokens for p in prompts)  # the server counts the same
    assert min(lengths) >= 30 and max(lengths) <= 90 and len(set(lengths)) > 20
    assert statistics.mean(lengths) == pytest.approx(60, abs=3) and statistics.stdev(lengths) == pytest.approx(
        15, rel=0.25)
    assert case.prompts(tmp_path) == prompts  # seeded
    assert settings(dataset="synthetic", seed=4, synthetic={"input_tokens": 60, "output_tokens": 16}).prompts(
        tmp_path) != prompts


def test_the_reference_server_counts_the_synthetic_lengths(serve_front: Any, tmp_path: Path) -> None:
    case = settings(dataset="synthetic", synthetic={"prompts": 8, "input_tokens": {"mean": 40, "stdev": 10},
                                                    "output_tokens": {"mean": 6, "stdev": 2, "max": 9}})
    prompts = case.prompts(tmp_path)
    run_load_test(OpenAIBackend(serve_front(ModelServer(MODEL, zero_latency=True)), MODEL), prompts,
                  [LoadPoint(concurrency=2, requests=8)], tmp_path)
    sent = {record["index"]: record for record in read_records(tmp_path / "records.jsonl")}
    assert [(sent[i]["input_tokens"], sent[i]["output_tokens"]) for i in range(8)] == [
        (p.input_tokens, p.output_tokens) for p in prompts]


def test_synthetic_prompts_with_a_tokenizer_file(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.decoder = tokenizers.decoders.WordPiece()
    trainer = tokenizers.trainers.WordPieceTrainer(vocab_size=60, special_tokens=["[UNK]"])
    tokenizer.train_from_iterator(["the model serves tokens fast while the batch grows"] * 50, trainer)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    case = settings(dataset="synthetic", synthetic={"prompts": 20, "input_tokens": {"mean": 50, "stdev": 8},
                                                    "output_tokens": 4, "tokenizer": "tokenizer.json"})
    prompts = case.prompts(tmp_path)
    for prompt in prompts:
        ids = tokenizer.encode(prompt.text, add_special_tokens=False).ids
        assert len(ids) == prompt.input_tokens and len(tokenize(prompt.text)) != prompt.input_tokens
    assert statistics.mean(p.input_tokens for p in prompts) == pytest.approx(50, abs=5)
    with pytest.raises(TopsailError, match="tokenizer .*missing.json: not a tokenizers file"):
        settings(dataset="synthetic", synthetic={"input_tokens": 5, "output_tokens": 4,
                                                 "tokenizer": "missing.json"}).prompts(tmp_path)


def test_length_filters_keep_the_prompts_in_range(tmp_path: Path) -> None:
    bundled = settings().prompts(tmp_path)
    kept = settings(min_input_tokens=40, max_input_tokens=80, max_output_tokens=40, max_sequence_tokens=110,
                    max_prompts=5).prompts(tmp_path)
    assert len(kept) == 5 and len(bundled) == 64
    assert all(40 <= p.input_tokens <= 80 and p.output_tokens <= 40 and p.input_tokens + p.output_tokens <= 110
               for p in kept)
    every = settings(min_input_tokens=40, max_input_tokens=80).prompts(tmp_path)
    assert every == [p for p in bundled if 40 <= p.input_tokens <= 80]  # in the file's order
    with pytest.raises(TopsailError, match=r"synthetic.jsonl: no prompt left after the filters min_input_tokens=500 "
                                           r"\(its 64 prompts: input tokens 25-96, output tokens 16-64\)"):
        settings(min_input_tokens=500).prompts(tmp_path)


@pytest.mark.parametrize(("values", "message"), [
    ({"dataset": "synthetic"}, "dataset: synthetic and the synthetic: .* go together"),
    ({"synthetic": {"input_tokens": 5, "output_tokens": 5}}, "go together"),
    ({"dataset": "synthetic", "synthetic": {"input_tokens": {"mean": 5, "min": 9, "max": 3}, "output_tokens": 5}},
     r"key synthetic.input_tokens.*max \(3\) < min \(9\)"),
    ({"dataset": "synthetic", "synthetic": {"input_tokens": 5, "output_tokens": 5, "prompt": 3}}, "prompt"),
    ({"max_input_tokens": 0}, "key max_input_tokens"),
])
def test_bad_dataset_settings_are_named(values: dict[str, Any], message: str) -> None:
    with pytest.raises(TopsailError, match=f"case x: invalid load settings: .*{message}"):
        settings(**values)
