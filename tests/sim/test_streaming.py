"""pods/exec, pods/attach and pods/portforward through the official client and kubectl 1.32, as users run them."""

from __future__ import annotations

import base64
import json
import os
import queue
import re
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import websocket
import yaml
from kubernetes import client
from kubernetes.stream import portforward, stream

from pytest_topsail.sim.controllers.containers import STDERR, STDOUT, run_exec
from pytest_topsail.sim.streams import spdy

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
WAIT = 20.0


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(WAIT)
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass  # the forwarding side went away


@pytest.fixture(scope="module")
def echo_port() -> Iterator[int]:
    """A loopback TCP echo server: the process a pod's container port leads to."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def sim(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = {"seed": 3, "node_pools": [{"name": "cpu", "count": 1}]}
    yield from start_sim(tmp_path_factory, "stream-sim", profile=profile)


@pytest.fixture(scope="module")
def core(sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(sim.api_client())


@pytest.fixture(scope="module")
def pod(sim: Any, core: client.CoreV1Api, echo_port: int) -> str:
    """A running pod with env from every source, serving container port 8033 on the echo server."""
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"mode": "fast"}})
    core.create_namespaced_secret("default", {"metadata": {"name": "sec"},
                                              "data": {"token": base64.b64encode(b"s3cret").decode()}})
    core.create_namespaced_pod("default", {
        "metadata": {"name": "worker", "labels": {"app": "w"},
                     "annotations": {"sim.topsail.io/endpoint-8033": f"127.0.0.1:{echo_port}",
                                     "sim.topsail.io/endpoint-9000": "10.1.2.3:80"}},
        "spec": {"containers": [{
            "name": "main", "image": "busybox", "command": ["sleep", "infinity"],
            "env": [{"name": "X", "value": "hello world"},
                    {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}}],
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}]}]}})
    deadline = time.monotonic() + WAIT
    while core.read_namespaced_pod("worker", "default").status.phase != "Running":
        assert time.monotonic() < deadline, "pod worker did not start"
        time.sleep(0.05)
    return "worker"


def _exec(core: client.CoreV1Api, pod: str, command: list[str], **kwargs: Any) -> Any:
    return stream(core.connect_get_namespaced_pod_exec, pod, "default", command=command, stderr=True, stdout=True,
                  stdin=False, tty=False, **kwargs)


# ----------------------------------------------------------------- the mini-shell
def test_run_exec_runs_statements_with_the_environment() -> None:
    script = "echo $X; echo 'a;$X' >&2; false || echo $?; Y=2 && echo \"${Y}x\"; exit 4; echo no"
    result = run_exec(["sh", "-c", script], {"X": "1"})
    assert result is not None
    assert result.text(STDOUT) == "1\n1\n2x\n"
    assert result.text(STDERR) == "a;$X\n"
    assert result.exit_code == 4


def test_run_exec_sleep_orders_output_in_time_and_unknown_programs() -> None:
    result = run_exec(["/bin/sh", "-c", "echo a; sleep 1.5; nosuch"], {})
    assert result is not None
    assert [(at, text) for at, _, text in result.output] == [(0.0, "a\n"), (1.5, "sh: nosuch: not found\n")]
    assert (result.exit_code, result.seconds) == (127, 1.5)
    assert run_exec(["tar", "cf", "-", "/data"], {}) is None
    assert run_exec(["printenv", "X"], {"X": "v"}).text(STDOUT) == "v\n"  # type: ignore[union-attr]


def test_run_exec_loops_for_while_until_and_nesting() -> None:
    result = run_exec(["sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.5; done; echo end"], {})
    assert result is not None
    assert [(at, text) for at, _, text in result.output] == [(0.0, "1\n"), (0.5, "2\n"), (1.0, "3\n"), (1.5, "end\n")]
    nested = run_exec(["sh", "-c", "for a in x y; do for b in 1 2; do echo $a$b; done; done"], {})
    assert nested is not None and nested.text(STDOUT) == "x1\nx2\ny1\ny2\n"
    never = run_exec(["sh", "-c", "while false; do echo no; done; until true; do echo no; done; echo ok"], {})
    assert never is not None and (never.text(STDOUT), never.exit_code) == ("ok\n", 0)
    broken = run_exec(["sh", "-c", "for i in 1 2; echo $i"], {})
    assert broken is not None and broken.exit_code == 2 and "without 'do ... done'" in broken.text(STDERR)


def test_run_exec_endless_loop_is_cut_after_an_hour_of_sleeps() -> None:
    result = run_exec(["sh", "-c", "while true; do echo tick; sleep 10; done"], {})
    assert result is not None
    assert result.output[:2] == ((0.0, STDOUT, "tick\n"), (10.0, STDOUT, "tick\n"))
    assert 3600 <= result.seconds <= 3610


# ----------------------------------------------------------------- exec, official client
def test_exec_prints_the_pod_environment(core: client.CoreV1Api, pod: str) -> None:
    output = _exec(core, pod, ["sh", "-c", "echo $X/$POD_NS/$APP/$MODE/$TOKEN/$CFG_mode/$HOSTNAME"])
    assert output == "hello world/default/w/fast/s3cret/fast/worker\n"


def test_exec_reports_the_exit_code(core: client.CoreV1Api, pod: str) -> None:
    response = _exec(core, pod, ["sh", "-c", "echo out; echo err >&2; exit 3"], _preload_content=False)
    response.run_forever(timeout=WAIT)
    assert (response.read_stdout(), response.read_stderr()) == ("out\n", "err\n")
    assert response.returncode == 3
    response = _exec(core, pod, ["echo", "fine"], _preload_content=False)
    response.run_forever(timeout=WAIT)
    assert (response.read_stdout(), response.returncode) == ("fine\n", 0)


def _raw_exec(sim: Any, pod: str, protocol: str, command: list[str]) -> list[bytes]:
    query = urllib.parse.urlencode([("stdout", "true"), ("stderr", "true")] + [("command", word) for word in command])
    url = sim.url.replace("https://", "wss://") + f"/api/v1/namespaces/default/pods/{pod}/exec?{query}"
    ca = sim.kubeconfig_path.with_name("ws-ca.crt")
    cluster = yaml.safe_load(sim.kubeconfig_path.read_text())["clusters"][0]["cluster"]
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    ws = websocket.create_connection(url, header=[f"Authorization: Bearer {sim.token()}"], subprotocols=[protocol],
                                     sslopt={"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": str(ca)}, timeout=WAIT)
    assert ws.subprotocol == protocol
    messages = []
    try:
        while True:
            opcode, data = ws.recv_data()
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                break
            messages.append(data)
    except websocket.WebSocketConnectionClosedException:
        pass
    return messages


def test_exec_v4_status_channel_carries_the_nonzero_exit_code(sim: Any, pod: str) -> None:
    messages = _raw_exec(sim, pod, "v4.channel.k8s.io", ["sh", "-c", "exit 5"])
    status = json.loads(messages[-1][1:])
    assert messages[-1][0] == 3
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "5"}]


def test_exec_old_protocol_gets_the_error_as_text(sim: Any, pod: str) -> None:
    messages = _raw_exec(sim, pod, "channel.k8s.io", ["sh", "-c", "echo hi; exit 2"])
    assert messages[0] == b"\x01hi\n"
    assert messages[-1].startswith(b"\x03command terminated with non-zero exit code")


def test_exec_needs_websocket_and_a_started_container(sim: Any, core: client.CoreV1Api, pod: str) -> None:
    spdy_upgrade = sim.raw("POST", f"/api/v1/namespaces/default/pods/{pod}/exec?command=ls&stdout=true")
    assert spdy_upgrade.status_code == 400 and "WebSocket" in spdy_upgrade.json()["message"]
    core.create_namespaced_pod("default", {"metadata": {"name": "stuck"}, "spec": {
        "nodeSelector": {"nowhere": "true"}, "containers": [{"name": "main", "image": "busybox"}]}})
    pending = sim.raw("GET", "/api/v1/namespaces/default/pods/stuck/exec?command=ls&stdout=true")
    assert pending.status_code == 400
    assert pending.json()["message"] == 'container "main" in pod "stuck" is waiting to start: ContainerCreating'
    missing = sim.raw("GET", "/api/v1/namespaces/default/pods/nosuch/exec?command=ls&stdout=true")
    assert missing.status_code == 404


def test_discovery_lists_the_streaming_subresources(core: client.CoreV1Api) -> None:
    names = {resource.name: resource.verbs for resource in core.get_api_resources().resources}
    for sub in ("pods/exec", "pods/attach", "pods/portforward"):
        assert names[sub] == ["create", "get"]


# ----------------------------------------------------------------- exec, attach, cp with kubectl
@needs_kubectl
def test_kubectl_exec_echo_and_exit_code(sim: Any, pod: str) -> None:
    result = sim.kubectl("exec", pod, "--", "sh", "-c", "echo $X")
    assert result.stdout == "hello world\n"
    failed = sim.kubectl("exec", pod, "--", "sh", "-c", "echo partial; exit 3", check=False)
    assert (failed.returncode, failed.stdout) == (3, "partial\n")
    assert "command terminated with exit code 3" in failed.stderr
    looped = sim.kubectl("exec", pod, "--", "sh", "-c", "for i in 1 2 3; do echo $X $i; sleep 0.2; done")
    assert looped.stdout == "hello world 1\nhello world 2\nhello world 3\n"


@needs_kubectl
def test_kubectl_exec_over_spdy(sim: Any, pod: str) -> None:
    """kubectl before 1.30 (and 1.32 with WebSockets off) upgrades the connection to SPDY/3.1."""
    env = {**os.environ, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    result = subprocess.run(["kubectl", "--kubeconfig", str(sim.kubeconfig_path), "exec", pod, "--", "sh", "-c",
                             "echo $X; echo oops >&2; exit 4"], capture_output=True, text=True, env=env,
                            timeout=WAIT)
    assert (result.returncode, result.stdout) == (4, "hello world\n")
    assert result.stderr.startswith("oops\n") and "command terminated with exit code 4" in result.stderr


@needs_kubectl
def test_kubectl_attach_and_cp_say_they_are_not_simulated(sim: Any, pod: str, tmp_path: Any) -> None:
    attach = sim.kubectl("attach", pod, check=False)
    assert attach.returncode != 0
    assert "the simulated cluster does not support pods/attach" in attach.stderr
    copy = sim.kubectl("cp", f"default/{pod}:/etc/hostname", str(tmp_path / "hostname"), check=False)
    assert copy.returncode != 0
    assert "kubectl cp, is not simulated" in copy.stderr


# ----------------------------------------------------------------- SPDY framing
def test_spdy_dictionary_is_the_protocol_one() -> None:
    import hashlib

    assert len(spdy.DICTIONARY) == 1423
    assert hashlib.sha256(spdy.DICTIONARY).hexdigest() == \
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"


def test_spdy_frames_parse_across_arbitrary_splits() -> None:
    sender, receiver = spdy.Codec(), spdy.Codec()
    wire = (sender.syn_stream(1, {"streamType": "error", "port": "8033", "requestID": "0"}, fin=True)
            + sender.syn_stream(3, {"streamtype": "data", "port": "8033", "requestid": "0"})
            + sender.data(3, b"x" * 70000) + sender.ping(7) + sender.data(3, fin=True))
    frames = [frame for index in range(0, len(wire), 5) for frame in receiver.feed(wire[index:index + 5])]
    assert [(f.kind, f.stream_id, f.fin) for f in frames] == [
        (spdy.SYN_STREAM, 1, True), (spdy.SYN_STREAM, 3, False), (spdy.DATA, 3, False), (spdy.PING, 0, False),
        (spdy.DATA, 3, True)]
    assert frames[1].headers == {"streamtype": "data", "port": "8033", "requestid": "0"}
    assert (len(frames[2].data), frames[3].value) == (70000, 7)
    with pytest.raises(spdy.SpdyError):
        spdy.Codec().feed(b"\x80\x02\x00\x01\x00\x00\x00\x0a" + bytes(10))  # SPDY/2


# ----------------------------------------------------------------- port-forward, official client
def _roundtrip(sock: Any, payload: bytes) -> bytes:
    sock.settimeout(WAIT)
    sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
    sender.start()
    received = b""
    while len(received) < len(payload):
        data = sock.recv(1 << 20)
        if not data:
            break
        received += data
    sender.join(WAIT)
    return received


def test_portforward_client_echoes_large_payloads_on_several_ports(core: client.CoreV1Api, pod: str) -> None:
    forward = portforward(core.connect_get_namespaced_pod_portforward, pod, "default", ports="8033,9000,8080")
    payload = bytes(range(256)) * 12_000  # 3 MB
    assert _roundtrip(forward.socket(8033), payload) == payload
    forward.socket(8080).settimeout(WAIT)
    assert forward.socket(8080).recv(10) == b""
    assert "dial tcp4 127.0.0.1:8080: connect: connection refused" in forward.error(8080)
    assert forward.socket(9000).recv(10) == b""  # an annotation may only name a loopback address
    assert "connection refused" in forward.error(9000)
    forward.close()


def test_portforward_client_concurrent_connections(sim: Any, pod: str) -> None:
    # One ApiClient per thread, as the official client must be used for concurrent streams: kubernetes.stream swaps
    # the `call_api` of the ApiClient it is given for the length of the call and then puts back the one it found
    # (stream.py, _websocket_request). On a shared client, a thread whose swap another thread's restore undid sends
    # a plain GET without an Upgrade header (the simulator rightly answers 400 "needs a WebSocket ... upgrade"), as
    # the real API server does (kubernetes-client/python#928). pytest_topsail's PortForward has a client of its own.
    def one(index: int) -> bool:
        with sim.api_client() as own:
            forward = portforward(client.CoreV1Api(own).connect_get_namespaced_pod_portforward, pod, "default",
                                  ports="8033")
            payload = f"connection {index} ".encode() * 20_000
            try:
                return _roundtrip(forward.socket(8033), payload) == payload
            finally:
                forward.close()

    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(one, range(6)))


# ----------------------------------------------------------------- port-forward, kubectl
def _forwarded(lines: queue.Queue[str], remotes: tuple[int, ...]) -> dict[int, int]:
    """The local port kubectl bound for each remote port, read from its "Forwarding from 127.0.0.1:L -> R" lines
    (kubectl picks them itself: a port chosen by the test and freed before kubectl binds it could be taken)."""
    found: dict[int, int] = {}
    while set(found) != set(remotes):
        try:
            line = lines.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("kubectl port-forward did not start listening") from None
        if match := re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)", line):
            found[int(match[2])] = int(match[1])
    return found


@pytest.fixture(params=["websocket", "spdy"])
def kubectl_forward(request: pytest.FixtureRequest, sim: Any,
                    pod: str) -> Iterator[tuple[int, int, subprocess.Popen[str]]]:
    """`kubectl port-forward pod/worker A:8033 B:8080` running, once it printed that it listens: kubectl 1.32's
    SPDY inside a WebSocket, or its fallback, the connection upgraded to SPDY/3.1."""
    env = {**os.environ, "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false" if request.param == "spdy" else "true"}
    process = subprocess.Popen(["kubectl", "--kubeconfig", str(sim.kubeconfig_path), "port-forward", f"pod/{pod}",
                                ":8033", ":8080"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
        ports = _forwarded(lines, (8033, 8080))  # listening on both; connecting would forward
        yield ports[8033], ports[8080], process
    finally:
        process.terminate()
        try:
            process.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


@needs_kubectl
def test_kubectl_port_forward_concurrent_large_and_clean_close(kubectl_forward: Any) -> None:
    local, _, process = kubectl_forward

    def one(index: int) -> bool:
        payload = bytes([index]) * 1_500_000
        with socket.create_connection(("127.0.0.1", local), timeout=WAIT) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)  # the echo server then closes, and so does the forwarded connection
            received = b""
            while data := sock.recv(1 << 20):
                received += data
        return received == payload

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(one, range(4)))
    assert process.poll() is None


@needs_kubectl
def test_kubectl_port_forward_to_a_port_without_listener(kubectl_forward: Any) -> None:
    _, refused, process = kubectl_forward
    with socket.create_connection(("127.0.0.1", refused), timeout=WAIT) as sock:
        sock.sendall(b"hello")
        sock.settimeout(WAIT)
        try:  # closed with nothing received: a FIN, or a reset when kubectl closes before reading our "hello"
            assert sock.recv(10) == b""
        except ConnectionResetError:
            pass
    process.wait(WAIT)  # kubectl 1.32 gives up the whole forward when a connection fails
    stderr = process.stderr.read() if process.stderr else ""
    assert "an error occurred forwarding" in stderr
    assert "dial tcp4 127.0.0.1:8080: connect: connection refused" in stderr
