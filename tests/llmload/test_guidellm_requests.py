"""The simulated vLLM answers the requests guidellm 0.8.1 sends, as vLLM does (benchmarks/guidellm_vllm.py runs the
real guidellm against it): chat messages whose content is a list of text parts, and ``max_completion_tokens``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.serving import ModelServer
from pytest_topsail.tgis.tokenizer import tokenize

MODEL = "granite-3b"
PREFIX = "You are a careful assistant. Answer briefly and cite the document."
TEXT = "0 7 m0 Suggest shake effort many last prepare small. Maintain throw hope parent."


@pytest.fixture
def front(serve_front: Any) -> str:
    return serve_front(ModelServer(MODEL, ModelConfig(enable_prefix_caching=True), zero_latency=True))


def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def guidellm_chat(max_completion_tokens: int, prefix: str = PREFIX) -> dict[str, Any]:
    """A streamed chat request as guidellm 0.8.1's OpenAI HTTP backend builds it (synthetic data with a prefix)."""
    return {"model": MODEL, "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "max_completion_tokens": max_completion_tokens, "stop": None, "ignore_eos": True,
            "messages": [{"role": "system", "content": prefix},
                         {"role": "user", "content": [{"type": "text", "text": TEXT}]}]}


def usage_of(stream: str) -> dict[str, Any]:
    chunks = [json.loads(line[6:]) for line in stream.split("\n\n") if line.startswith("data: {")]
    return next(chunk["usage"] for chunk in chunks if chunk.get("usage"))


def test_text_parts_and_max_completion_tokens(front: str) -> None:
    status, stream = post(front, "/v1/chat/completions", guidellm_chat(37))
    assert status == 200, stream
    usage = usage_of(stream)
    assert usage["completion_tokens"] == 37  # not the default 16 of a missing max_tokens
    # the prompt the server counts is the system prefix and the user's text part, in the chat layout
    assert usage["prompt_tokens"] == len(tokenize(f"system: {PREFIX}\nuser: {TEXT}\nassistant:"))


def test_the_shared_system_prefix_is_cached(front: str) -> None:
    long_prefix = " ".join([PREFIX] * 8)
    post(front, "/v1/chat/completions", guidellm_chat(4, long_prefix))
    status, stream = post(front, "/v1/chat/completions", guidellm_chat(4, long_prefix))
    assert status == 200
    cached, prompt = usage_of(stream)["prompt_tokens_details"]["cached_tokens"], usage_of(stream)["prompt_tokens"]
    assert len(tokenize(f"system: {long_prefix}")) - 16 <= cached < prompt  # whole blocks of the shared prefix


def test_max_completion_tokens_wins_over_max_tokens(front: str) -> None:
    body = {**guidellm_chat(5), "max_tokens": 40, "stream": False}
    status, text = post(front, "/v1/chat/completions", body)
    assert status == 200 and json.loads(text)["usage"]["completion_tokens"] == 5


@pytest.mark.parametrize(("content", "message"), [
    ([{"type": "image_url", "image_url": {"url": "x"}}], "content part of type 'image_url': this model takes text"),
    ([{"type": "text"}], "content part of type 'text'"),
    (7, "a message's content must be a string or a list of content parts"),
])
def test_other_content_is_refused(front: str, content: Any, message: str) -> None:
    status, answer = post(front, "/v1/chat/completions", {"model": MODEL, "messages": [
        {"role": "user", "content": content}]})
    assert status == 400 and message in answer["message"] and answer["param"] == "messages"


def test_max_completion_tokens_must_be_positive(front: str) -> None:
    status, answer = post(front, "/v1/chat/completions", {**guidellm_chat(0), "stream": False})
    assert status == 400 and answer["message"] == "max_completion_tokens must be at least 1, got 0."
