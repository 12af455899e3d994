"""The OpenAI backend's API key never reaches a failure message, even when the server echoes it or its header."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from pytest_topsail.llmload.backends import BackendError
from pytest_topsail.llmload.backends.openai_http import OpenAIBackend
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.records import RequestRecord

CANARY = "sk-canary-4f1e9b2c7d"


async def _echoing_server() -> tuple[web.AppRunner, str]:
    async def refuse(request: web.Request) -> web.Response:
        header = request.headers.get("Authorization", "")
        return web.json_response({"error": {"message": f"invalid key {header.split()[-1]} (header: {header})"}},
                                 status=401)

    app = web.Application()
    app.router.add_post("/v1/completions", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def test_echoed_api_key_is_hidden_in_the_failure_message() -> None:
    async def run() -> str:
        runner, url = await _echoing_server()
        backend = OpenAIBackend(url, "m", stream=False, api_key=CANARY)
        await backend.open()
        try:
            with pytest.raises(BackendError) as failure:
                await backend.send(Prompt("hi", 3, 3), RequestRecord(point=0, index=0))
            return f"{failure.value.status}: {failure.value.message}"
        finally:
            await backend.close()
            await runner.cleanup()

    message = asyncio.run(asyncio.wait_for(run(), timeout=20))
    assert message.startswith("http_401: invalid key <redacted>"), message
    assert CANARY not in message
