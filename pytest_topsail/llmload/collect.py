"""Records travel from the generator pods to the runner through the Kubernetes API, as on a multi-node cluster: each
pod serves its own records on a container port (``RecordServer``, HTTP on the pod's loopback) until the runner has
collected them; the runner reaches every pod through ``pods/portforward`` (``Collector``), pulling the records as
they are written, so a pod that dies mid-run leaves the runner its records up to the last pull (a fraction of a
second before its death). The simulator runs the same path: its real-workload runtime maps the pod's port to a
local one and annotates the pod with it, where its ``pods/portforward`` connects.

Worker endpoints: ``GET /records?offset=N`` (the records file from byte N, whole lines only), ``GET /point`` (the
point document: the start, then the window once the point ended), ``POST /collected`` (the runner has everything:
the worker exits).
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

if TYPE_CHECKING:  # the worker imports this module: it must not load the Kubernetes client (seconds of start-up)
    from pytest_topsail.kube.client import Kube

PORT = 8471  # the generator container's records port
PORT_ENV = "TOPSAIL_LOAD_PORT"  # where the worker listens (the simulator remaps it to the pod's local port)
PULL_S = 0.3
REQUEST_TIMEOUT_S = 10.0


class RecordServer:
    """The worker side: serves ``records`` (a JSON-lines file growing as requests end) and ``point`` (a JSON file)
    on 127.0.0.1:``port`` in a thread; ``wait_collected`` until the runner said it has them (bounded)."""

    def __init__(self, port: int, records: Path, point: Path) -> None:
        self.records, self.point = records, point
        self.collected = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urlparse(self.path)
                if url.path == "/records":
                    offset = int((parse_qs(url.query).get("offset") or ["0"])[0])
                    self.answer(server.read_records(offset), "application/jsonl")
                elif url.path == "/point":
                    self.answer(server.point.read_bytes() if server.point.is_file() else b"{}", "application/json")
                else:
                    self.send_error(404)

            def do_POST(self) -> None:  # noqa: N802
                if urlparse(self.path).path != "/collected":
                    self.send_error(404)
                    return
                server.collected.set()
                self.answer(b"{}", "application/json")

            def answer(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:  # no line per pull in the pod's log
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, name="records", daemon=True)
        self.thread.start()

    def read_records(self, offset: int) -> bytes:
        if not self.records.is_file():
            return b""
        with self.records.open("rb") as file:
            file.seek(offset)
            data = file.read()
        return data[:data.rfind(b"\n") + 1]  # whole lines: the last may be half written

    def wait_collected(self, timeout: float) -> bool:
        collected = self.collected.wait(timeout)
        self.http.shutdown()
        return collected


class Collector:
    """The runner side, for one generator pod: pulls its records and point document into ``directory`` (as
    ``<pod>.jsonl`` and ``<pod>.json``) through a port-forward, until the pod's point ended and every record is
    here (then tells the pod), the pod is gone, or ``stop`` is set."""

    def __init__(self, kube: Kube, namespace: str, pod: str, directory: Path, not_before: float = 0.0) -> None:
        self.kube, self.namespace, self.pod = kube, namespace, pod
        self.not_before = not_before  # epoch s: the first pull (after the start barrier: no work of ours at it)
        self.records, self.point = directory / f"{pod}.jsonl", directory / f"{pod}.json"
        self.offset = 0
        self.done = False
        self.error = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name=f"collect {pod}", daemon=True)

    def run(self) -> None:
        # the port-forward is made before the barrier, the first pull is at it: making it loads the official
        # client's CoreV1Api (0.6 s of CPU), which on a loaded machine, after the barrier, put the first pull 3-5 s
        # into a 4.5 s point (a pod lost before then kept no records)
        from pytest_topsail.kube.portforward import PortForward

        try:
            with PortForward(self.kube, self.namespace, self.pod, PORT) as forward:
                base = f"http://{forward.address}"
                wait = max(0.0, self.not_before - time.time())
                while not self.stop.wait(wait):
                    try:
                        self.done = self.pull(base)
                    except (OSError, urllib.error.URLError, ValueError) as error:
                        self.error = str(error)  # the pod not serving (yet, or any more): try again
                    if self.done:
                        release(f"{base}/collected")
                        return
                    wait = PULL_S
        except Exception as error:  # noqa: BLE001 - the runner names the pod; what was pulled is kept
            self.error = f"{type(error).__name__}: {error}"

    def pull(self, base: str) -> bool:
        """One pull; True when the point had ended before it and every record is here."""
        document = json.loads(get(f"{base}/point") or b"{}")
        data = get(f"{base}/records?offset={self.offset}")
        if data:
            with self.records.open("ab") as file:
                file.write(data)
            self.offset += len(data)
        if document:
            self.point.write_text(json.dumps(document), encoding="utf-8")
        return "ended" in document and not data


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as response:
        return bytes(response.read())


def post(url: str) -> None:
    request = urllib.request.Request(url, data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S):
        pass


def release(url: str) -> None:
    """Tell the pod it may exit: every record is here already, so a lost answer (the pod exits as it answers,
    closing the tunnel) changes nothing; a pod never told exits after its collect_timeout_s."""
    try:
        post(url)
    except (OSError, urllib.error.URLError):
        pass
