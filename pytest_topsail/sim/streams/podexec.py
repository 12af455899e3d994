"""pods/exec over WebSocket or SPDY/3.1: the command runs in the simulated container's mini-shell
(controllers/containers.py).

Channels as the kubelet's: 0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize; `v5.channel.k8s.io` adds 255 (close).
With `v4.channel.k8s.io` and later the error channel ends the stream with a Status: Success, or Failure with reason
NonZeroExitCode and the exit code as cause (kubectl exits with it; the official client's `returncode` reads it).
The container's environment is the pod spec's (`env` values, fieldRef, ConfigMap and Secret keys, `envFrom`) plus
HOSTNAME, PATH and HOME. Output appears at the time the command's `sleep`s put it.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web

from pytest_topsail.sim.controllers.containers import ExecResult, run_exec
from pytest_topsail.sim.machinery import apierror, gojson
from pytest_topsail.sim.node import nvidiasmi
from pytest_topsail.sim.streams import spdy, streaming
from pytest_topsail.waiting import Deadline

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
STDOUT, STDERR, ERROR = 1, 2, 3
CLOSE_CHANNEL = 255  # v5.channel.k8s.io: [255, channel] closes that channel
STREAMS_TIMEOUT = 30.0  # how long a SPDY client may take to open the streams it asked for
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


async def serve(request: web.Request, store: Any, pod: dict[str, Any], container: str) -> web.StreamResponse:
    command = request.query.getall("command", [])
    if not command:
        raise apierror.bad_request("you must specify at least 1 command")
    stdout, stderr = streaming.query_flag(request, "stdout"), streaming.query_flag(request, "stderr")
    if not (stdout or stderr or streaming.query_flag(request, "stdin")):
        raise apierror.bad_request("you must specify at least 1 of stdin, stdout, stderr")
    route = {STDOUT: STDOUT if stdout else 0, STDERR: STDERR if stderr else 0}  # output stream -> channel, 0: none
    if streaming.query_flag(request, "tty"):
        route[STDERR] = route[STDOUT]  # a terminal merges stderr into stdout
    env, tools = environment(store, pod, container), programs(store, pod)
    interactive = streaming.query_flag(request, "stdin") and _reads_stdin([str(word) for word in command])
    if interactive and not streaming.is_spdy_upgrade(request):
        return await _serve_interactive(request, [str(word) for word in command], env, tools, route)
    result = run_exec([str(word) for word in command], env, tools)
    status = _not_found(command[0], container) if result is None else None
    if streaming.is_spdy_upgrade(request):
        return await _serve_spdy(request, command, result, status, route)
    socket = await streaming.accept(request, PROTOCOLS, "exec")
    protocol = streaming.protocol_of(socket, PROTOCOLS)
    closed = asyncio.Event()
    reader = asyncio.get_running_loop().create_task(_drain(socket, closed))

    async def send(channel: int, data: bytes) -> None:
        await socket.send_bytes(bytes([channel]) + data)

    try:
        if result is not None:
            await _play(send, result, route, closed)
            status = _exit_status(command, result.exit_code)
        body = _status_body(protocol, status)
        if not closed.is_set() and body is not None:
            await send(ERROR, body)
    finally:
        reader.cancel()
        await socket.close()
    return socket


def _reads_stdin(command: list[str]) -> bool:
    """`cat` (alone or as a shell's script) and a shell without a script read what the client types."""
    if command[-1:] == ["cat"] and (len(command) == 1 or command[-2] == "-c"):
        return True
    return len(command) == 1 and command[0].rpartition("/")[2] in ("sh", "bash")


async def _serve_interactive(request: web.Request, command: list[str], env: dict[str, str],
                             tools: dict[str, Callable[[list[str]], tuple[str, str, int]]],
                             route: dict[int, int]) -> web.StreamResponse:
    """A command reading stdin over WebSocket: `cat` echoes each input, a shell runs each line it gets (`exit`
    ends it); the end of input (a v5 close of channel 0, or the connection) ends them with exit code 0."""
    socket = await streaming.accept(request, PROTOCOLS, "exec")
    protocol = streaming.protocol_of(socket, PROTOCOLS)
    echo = command[-1] == "cat"
    pending, code = "", 0

    async def send(channel: int, text: str) -> None:
        if text and route[channel]:
            await socket.send_bytes(bytes([route[channel]]) + text.encode())

    async for message in socket:
        if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
            break
        data = message.data if isinstance(message.data, bytes) else message.data.encode()
        if data[:2] == bytes([CLOSE_CHANNEL, 0]):
            break
        if data[:1] != b"\x00":
            continue
        if echo:
            await send(STDOUT, data[1:].decode(errors="replace"))
            continue
        pending += data[1:].decode(errors="replace")
        *lines, pending = pending.split("\n")
        finished = False
        for line in lines:
            result = run_exec(["sh", "-c", line], env, tools)
            if result is not None:
                for _, stream, text in result.output:
                    await send(stream, text)
                code = result.exit_code
                finished = line.strip().split()[:1] == ["exit"]
            if finished:
                break
        if finished:
            break
    body = _status_body(protocol, _exit_status(command, code))
    if not socket.closed and body is not None:
        await socket.send_bytes(bytes([ERROR]) + body)
    await socket.close()
    return socket


async def _serve_spdy(request: web.Request, command: list[str], result: ExecResult | None,
                      status: dict[str, Any] | None, route: dict[int, int]) -> web.StreamResponse:
    """exec on a connection upgraded to SPDY/3.1: the client opens one stream per channel (header `streamtype`:
    error, stdin, stdout, stderr, resize); output goes to those streams, the status to the error stream."""
    stream, protocol = await streaming.upgrade_spdy(request, PROTOCOLS, "exec")
    codec = spdy.Codec()
    wanted = {"error"}  # the streams the output needs (stdin and resize are read by no one)
    if route[STDOUT]:
        wanted.add("stdout")
    if route[STDERR] == STDERR:
        wanted.add("stderr")
    stream_ids: dict[str, int] = {}
    closed = asyncio.Event()

    async def read_frames() -> None:
        try:
            while data := await stream.receive():
                for frame in codec.feed(data):
                    if frame.kind == spdy.SYN_STREAM:
                        await stream.send(codec.syn_reply(frame.stream_id))
                        stream_ids[frame.headers.get("streamtype", "")] = frame.stream_id
                    elif frame.kind == spdy.PING:
                        await stream.send(codec.ping(frame.value))
                    elif frame.kind == spdy.GOAWAY:
                        return
        except spdy.SpdyError:
            pass
        finally:
            closed.set()

    reader = asyncio.get_running_loop().create_task(read_frames())
    try:
        deadline = Deadline(STREAMS_TIMEOUT)
        while not wanted <= set(stream_ids) and not closed.is_set() and not deadline.expired():
            await asyncio.sleep(0.01)
        if not wanted <= set(stream_ids):
            return stream.response  # the client never opened its streams: nothing to answer on
        names = {STDOUT: "stdout", STDERR: "stderr"}

        async def send(channel: int, data: bytes) -> None:
            await stream.send(codec.data(stream_ids[names[channel]], data))

        if result is not None:
            await _play(send, result, route, closed)
            status = _exit_status(command, result.exit_code)
        body = _status_body(protocol, status)
        if not closed.is_set():
            if body is not None:
                await stream.send(codec.data(stream_ids["error"], body))
            for name in sorted(wanted):
                await stream.send(codec.data(stream_ids[name], fin=True))
    finally:
        reader.cancel()
    return stream.response


async def _drain(socket: web.WebSocketResponse, closed: asyncio.Event) -> None:
    """Read (and ignore: the mini-shell reads no input) what the client sends, until it closes the stream."""
    try:
        async for message in socket:
            if message.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                break
    finally:
        closed.set()


async def _play(send: Callable[[int, bytes], Awaitable[None]], result: ExecResult, route: dict[int, int],
                closed: asyncio.Event) -> None:
    """Send the output at its time after the start; end after the command's run time or when the client leaves."""
    start = time.monotonic()
    for at, stream, text in result.output:
        if await _wait(closed, start + at):
            return
        if route[stream]:
            await send(route[stream], text.encode())
    await _wait(closed, start + result.seconds)


async def _wait(closed: asyncio.Event, until: float) -> bool:
    """Wait until the monotonic time `until`; True when the client closed the stream first."""
    remaining = until - time.monotonic()
    if remaining > 0 and not closed.is_set():
        try:
            await asyncio.wait_for(closed.wait(), remaining)
        except TimeoutError:
            pass
    return closed.is_set()


def _status_body(protocol: str, status: dict[str, Any] | None) -> bytes | None:
    """What the error channel says at the end: v4 and later a Status (also on success), before only a failure."""
    if protocol in ("v5.channel.k8s.io", "v4.channel.k8s.io"):
        return gojson.dumps(status or {"metadata": {}, "status": "Success"})
    return status["message"].encode() if status is not None else None


def _exit_status(command: list[str], code: int) -> dict[str, Any] | None:
    if code == 0:
        return None
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"[{' '.join(command)}], exit code {code}",
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def _not_found(program: str, container: str) -> dict[str, Any]:
    message = (f'Internal error occurred: error executing command in container "{container}": exec: "{program}": '
               f"executable file not found in $PATH: the simulated container runs only its mini-shell (sh -c with "
               f"echo, printf, env, printenv, sleep, exit, ...); tar, and so kubectl cp, is not simulated")
    return {"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500}


def programs(store: Any, pod: dict[str, Any]) -> dict[str, Callable[[list[str]], tuple[str, str, int]]]:
    """The programs a container has besides the mini-shell's: nvidia-smi on a GPU node."""
    gpus = nvidiasmi.gpus_of(store, pod)
    if gpus is None:
        return {}
    return {"nvidia-smi": lambda args: nvidiasmi.run(args, gpus)}


# ----------------------------------------------------------------- the container's environment
def environment(store: Any, pod: dict[str, Any], container_name: str) -> dict[str, str]:
    env = {**BASE_ENV, "HOSTNAME": pod["metadata"]["name"]}
    namespace = pod["metadata"].get("namespace") or ""
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != container_name:
            continue
        for source in container.get("envFrom") or []:
            prefix = str(source.get("prefix") or "")
            for key, value in _source_data(store, namespace, source).items():
                env[prefix + key] = value
        for variable in container.get("env") or []:
            name = variable.get("name")
            if name:
                env[str(name)] = _value(store, pod, variable)
    return env


def _source_data(store: Any, namespace: str, source: dict[str, Any]) -> dict[str, str]:
    if source.get("configMapRef"):
        obj = _find(store, "configmaps", namespace, source["configMapRef"].get("name"))
        return {str(k): str(v) for k, v in ((obj or {}).get("data") or {}).items()}
    if source.get("secretRef"):
        obj = _find(store, "secrets", namespace, source["secretRef"].get("name"))
        return {str(k): _decode(v) for k, v in ((obj or {}).get("data") or {}).items()}
    return {}


def _value(store: Any, pod: dict[str, Any], variable: dict[str, Any]) -> str:
    if "value" in variable:
        return str(variable.get("value") or "")
    source = variable.get("valueFrom") or {}
    namespace = pod["metadata"].get("namespace") or ""
    if source.get("fieldRef"):
        return _field(pod, str(source["fieldRef"].get("fieldPath") or ""))
    for plural, ref_key in (("configmaps", "configMapKeyRef"), ("secrets", "secretKeyRef")):
        ref = source.get(ref_key)
        if ref:
            obj = _find(store, plural, namespace, ref.get("name")) or {}
            raw = (obj.get("data") or {}).get(ref.get("key"))
            if raw is None:
                return ""
            return _decode(raw) if plural == "secrets" else str(raw)
    return ""


def _field(pod: dict[str, Any], path: str) -> str:
    metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    match = _FIELD.match(path)
    if match:
        return str((metadata.get(match.group(1)) or {}).get(match.group(2), ""))
    values = {"metadata.name": metadata.get("name"), "metadata.namespace": metadata.get("namespace"),
              "metadata.uid": metadata.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.podIP": status.get("podIP"),
              "status.hostIP": status.get("hostIP")}
    return str(values.get(path) or "")


def _find(store: Any, plural: str, namespace: str, name: Any) -> dict[str, Any] | None:
    return store.find(store.resource_type(plural), namespace, str(name or "")) if name else None


def _decode(value: Any) -> str:
    try:
        return base64.b64decode(str(value)).decode()
    except (ValueError, UnicodeDecodeError):
        return ""
