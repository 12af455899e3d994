"""Open a local HTML file in headless Chromium through the DevTools protocol and report what the page did:
network requests, JavaScript exceptions and console errors, and the value of a final expression."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--remote-debugging-port=0",
         "--remote-allow-origins=*"]


@dataclass
class PageVisit:
    requests: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    result: Any = None


def _wait_for_port(profile: Path, process: subprocess.Popen[bytes], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    marker = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if marker.is_file():
            lines = marker.read_text().split()
            if lines:
                return int(lines[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before opening its DevTools port")
        time.sleep(0.05)
    raise TimeoutError(f"chromium did not open its DevTools port within {timeout} s")


class _Session:
    def __init__(self, socket: aiohttp.ClientWebSocketResponse, visit: PageVisit) -> None:
        self.socket = socket
        self.visit = visit
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def listen(self) -> None:
        async for message in self.socket:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            else:
                self.on_event(data.get("method", ""), data.get("params", {}))

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.visit.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.visit.exceptions.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.visit.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in
                                                      params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.visit.console_errors.append(params["entry"].get("text", ""))

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[number] = future
        await self.socket.send_str(json.dumps({"id": number, "method": method, "params": params}))
        answer = await asyncio.wait_for(future, timeout=30)
        if "error" in answer:
            raise RuntimeError(f"DevTools {method}: {answer['error']}")
        return answer.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        answer = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return answer.get("result", {}).get("value")


async def _visit(port: int, url: str, ready: str, final: str, timeout: float, width: int, height: int) -> PageVisit:
    visit = PageVisit()
    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as answer:
            target = await answer.json(content_type=None)
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket:
            session = _Session(socket, visit)
            listener = asyncio.create_task(session.listen())
            for domain in ("Network", "Runtime", "Log", "Page"):
                await session.call(f"{domain}.enable")
            await session.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                               deviceScaleFactor=1, mobile=False)
            await session.call("Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            while not await session.evaluate(ready):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"page not ready within {timeout} s: {ready}")
                await asyncio.sleep(0.1)
            visit.result = await session.evaluate(final)
            listener.cancel()
    return visit


def visit_page(path: Path, ready: str, final: str, timeout: float = 60.0, width: int = 1400,
               height: int = 900) -> PageVisit:
    """Load ``path`` in a ``width`` x ``height`` viewport, wait until the JavaScript expression ``ready`` is
    truthy, then return ``final``'s value (a promise is awaited)."""
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed")
    with tempfile.TemporaryDirectory(prefix="topsail-chromium-") as profile:
        process = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port = _wait_for_port(Path(profile), process, timeout=30)
            return asyncio.run(_visit(port, path.resolve().as_uri(), ready, final, timeout, width, height))
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


# What a reader sees, measured in the page (after every figure is drawn): the width against the viewport, where
# the verdict, the failures/changes and each suite's first figure sit, when the first figure was drawn, and the
# text of any figure that leaves its box or that a plot area covers (clipped tick labels, hidden axis titles,
# a title under the legend).
LAYOUT = (Path(__file__).parent / "layout.js").read_text(encoding="utf-8")
READY = "document.body.dataset.status === 'done'"

