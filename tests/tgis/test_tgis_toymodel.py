"""The toy model without any transport (the HTTP front and the gRPC server share it)."""

from __future__ import annotations

import socket

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis.server import ServerSettings, ServerThread
from pytest_topsail.tgis.tokenizer import token_texts
from pytest_topsail.tgis.toymodel import DecodingSettings, Generation, StopReason, ToyModel


def run(model: ToyModel, prompt: str, settings: DecodingSettings) -> tuple[str, list[str], StopReason]:
    generation = Generation(model, token_texts(prompt), settings)
    streamed = ""
    while not generation.finished:
        streamed += generation.step().text
    assert streamed == generation.text  # the pieces handed out add up to the final text
    return generation.text, [t.text for t in generation.tokens], generation.stop_reason


def test_same_seed_same_text_other_seed_other_text() -> None:
    model = ToyModel("ibm/granite-3b")
    sampled = DecodingSettings(sample=True, seed=11, temperature=0.9, top_p=0.9, max_new_tokens=15)
    assert run(model, "Hello there", sampled) == run(ToyModel("ibm/granite-3b"), "Hello there", sampled)
    other = DecodingSettings(sample=True, seed=12, temperature=0.9, top_p=0.9, max_new_tokens=15)
    assert run(model, "Hello there", other)[0] != run(model, "Hello there", sampled)[0]
    assert run(ToyModel("other/model-3b"), "Hello there", sampled)[0] != run(model, "Hello there", sampled)[0]


def test_stop_sequence_text_is_held_back_until_decided() -> None:
    model = ToyModel("ibm/granite-3b")
    text, _tokens, _reason = run(model, "Hi", DecodingSettings(max_new_tokens=12))
    target = text[len(text) // 2:len(text) // 2 + 6]
    for include in (True, False):
        settings = DecodingSettings(max_new_tokens=12, stop_sequences=(target, "zzz"), include_stop_sequence=include)
        cut, _tokens, reason = run(model, "Hi", settings)
        assert reason == StopReason.STOP_SEQUENCE
        assert cut == (text[:text.index(target) + len(target)] if include else text[:text.index(target)])


def test_dtype_noise_touches_logprobs_only() -> None:
    f16 = ToyModel("m-1b", config_name="tgis_native|f16", dtype="float16")
    bf16 = ToyModel("m-1b", config_name="hf_transformers|bf16", dtype="bfloat16")
    settings = DecodingSettings(max_new_tokens=10)
    first, second = Generation(f16, ["▁Hi"], settings), Generation(bf16, ["▁Hi"], settings)
    while not first.finished:
        first.step()
    while not second.finished:
        second.step()
    assert first.text == second.text
    assert [t.logprob for t in first.tokens] != [t.logprob for t in second.tokens]
    assert ToyModel("m-1b", diverge=True).context(["▁Hi"]).digest() != f16.context(["▁Hi"]).digest()


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(TopsailError, match=f"TGIS reference server: cannot listen on 127.0.0.1:{port}"):
            ServerThread(ServerSettings("m-1b", port=port, zero_latency=True)).start()
