"""The real-workload runtime: a container whose image matches an entry of the profile's `runtime` table runs as a
real local process, as a kubelet would run it (docs/simulator.md "Real workloads").

- The process sees a container filesystem: fresh mount, PID and UTS namespaces (`unshare`; the hostname is the
  pod's, as in Kubernetes), a root made of the host's
  top-level directories (bound) plus the pod's volumes at their mount paths: ConfigMap and Secret keys as files,
  emptyDir as a directory of the pod, a PersistentVolumeClaim as a directory kept per claim for the simulator's
  life, a hostPath the path of this machine (every simulated node is this machine), the entry's `files` (the
  image's own files, e.g. `/app/launcher.py`) and the termination-message file.
- command/args/env of the container, stdout and stderr merged line by line as `kubectl logs` shows them (a partial
  line waits for its newline or the end). Pods share this host's network: `/etc/hosts` maps the names the caller
  gives (the pods of the same owner) to 127.0.0.1, and a `*_PORT` variable's port (MASTER_PORT) is mapped to a free
  local port per owner, so two jobs never meet on one port.
- The exit: code 0 -> Completed, else Error; the termination-message file's content (else, with
  `FallbackToLogsOnError`, the log's last 80 lines) as the message; past the entry's `max_seconds` the process is
  killed (137, DeadlineExceeded).
- Deletion: SIGTERM to the container's first process, SIGKILL after the grace period. Nothing outlives the
  simulator: the `unshare` process gets SIGKILL when the simulator dies (PR_SET_PDEATHSIG, set by `setpriv`) and
  takes its PID namespace with it (`--kill-child`); `shutdown()` kills every process on a normal stop.
Needs Linux mount and PID namespaces (root, or unprivileged user namespaces); without them a matching container
fails to start with that reason.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import fnmatch
import os
import shlex
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TERMINATION_PATH = "/dev/termination-log"
MESSAGE_LIMIT = 4096  # bytes of a termination message, as the kubelet keeps
FALLBACK_LINES = 80
OUTPUT_CHUNK = 65536
_SKIPPED_TOPS = {"dev", "proc", "sys", "mnt", "lost+found"}


class RuntimeEntry(BaseModel):
    """One row of the profile's `runtime` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(min_length=1)  # fnmatch pattern of the container image, e.g. quay.io/modh/fms-hf-tuning:*
    command: list[str] = Field(default_factory=list)  # the image's entrypoint, used when the pod gives no command
    files: dict[str, str] = Field(default_factory=dict)  # path in the container -> local file or directory
    env: dict[str, str] = Field(default_factory=dict)  # the image's environment (the pod's env wins)
    max_seconds: float = Field(600, gt=0)  # a process running longer is killed (DeadlineExceeded)

    def local(self, text: str) -> str:
        """`{python}` -> this interpreter, `{package}` -> the pytest_topsail package directory, `{source}` -> the
        directory holding it (a PYTHONPATH entry that imports this very copy)."""
        package = Path(__file__).resolve().parents[2]
        return (text.replace("{python}", sys.executable).replace("{package}", str(package))
                .replace("{source}", str(package.parent)))


@dataclass(frozen=True)
class Exit:
    code: int
    reason: str  # Completed | Error | DeadlineExceeded | StartError
    message: str
    started: float
    finished: float


class RuntimeError_(Exception):
    """A container that cannot be started as asked (a volume source missing, a bad mount path)."""


@dataclass
class Workload:
    """One container running as a local process."""

    key: tuple[str, str, str]  # namespace, pod, container
    process: asyncio.subprocess.Process
    directory: Path
    on_line: Callable[[str], None]
    max_seconds: float
    fallback_to_logs: bool
    started: float = field(default_factory=time.time)
    tail: list[str] = field(default_factory=list)
    deadline_hit: bool = False
    exit: Exit | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    ports: dict[int, int] = field(default_factory=dict)  # declared container port -> the local port standing for it

    async def run(self) -> Exit:
        try:
            await asyncio.wait_for(self._pump(), self.max_seconds)
        except TimeoutError:
            self.deadline_hit = True
            self.kill()
        code = await self.process.wait()
        if code < 0:
            code = 128 - code  # killed by signal N: exit code 128 + N, as a container runtime reports it
        message = self._message(code)
        reason = "DeadlineExceeded" if self.deadline_hit else ("Completed" if code == 0 else "Error")
        if self.deadline_hit:
            message = message or f"killed after the runtime entry's max_seconds ({self.max_seconds:g}s)"
        self.exit = Exit(code, reason, message, self.started, time.time())
        self.done.set()
        return self.exit

    async def _pump(self) -> None:
        assert self.process.stdout is not None
        pending = b""
        while chunk := await self.process.stdout.read(OUTPUT_CHUNK):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._emit(line.decode(errors="replace") + "\n")
        if pending:
            self._emit(pending.decode(errors="replace") + "\n")
        await self.process.wait()

    def _emit(self, line: str) -> None:
        self.tail = [*self.tail[-(FALLBACK_LINES - 1):], line]
        self.on_line(line)

    def _message(self, code: int) -> str:
        path = self.directory / "termination-log"
        try:
            text = path.read_bytes()[:MESSAGE_LIMIT].decode(errors="replace")
        except OSError:
            text = ""
        if not text.strip() and code and self.fallback_to_logs:
            text = "".join(self.tail)[-MESSAGE_LIMIT:]
        return text

    def terminate(self, grace_seconds: float) -> None:
        """SIGTERM to the container's first process now, SIGKILL after the grace period (unless it ended)."""
        if self.exit is not None:
            return
        for pid in _children(self.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        asyncio.get_running_loop().call_later(max(0.0, grace_seconds), self.kill)

    def kill(self) -> None:
        if self.exit is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()  # unshare dies, the kernel kills its PID namespace (--kill-child)


class Runtime:
    """The runtime table and every workload it started; `root` holds volumes and per-pod directories."""

    def __init__(self, entries: list[RuntimeEntry], root: Path) -> None:
        self.entries = entries
        self.root = root
        self.workloads: dict[tuple[str, str, str], Workload] = {}
        self.tasks: set[asyncio.Task[Exit]] = set()
        self.ports: dict[tuple[str, int], int] = {}

    def match(self, image: str) -> RuntimeEntry | None:
        return next((e for e in self.entries if fnmatch.fnmatchcase(image or "", e.image)), None)

    async def start(self, pod: dict[str, Any], container: dict[str, Any], entry: RuntimeEntry,
                    get_object: Callable[[str, str, str], dict[str, Any] | None], hosts: list[str],
                    on_line: Callable[[str], None], on_exit: Callable[[Exit], None]) -> Workload:
        """Start `container` of `pod`; `on_exit` is called once with its Exit. `hosts`: names that resolve to this
        host. Raises RuntimeError_ when a volume or the namespaces are missing (the caller reports it as the
        container's start error)."""
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"], container["name"])
        directory = self.root / "pods" / key[0] / key[1] / key[2]
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        (directory / "termination-log").write_bytes(b"")
        hostname = ((pod.get("spec") or {}).get("hostname") or meta["name"])[:63]
        names = " ".join(dict.fromkeys([hostname, *hosts]))
        (directory / "hosts").write_text(f"127.0.0.1 localhost {names}\n::1 localhost\n")
        mounts = self._mounts(pod, container, entry, directory, get_object)
        mounts.append((str(directory / "hosts"), "/etc/hosts"))
        argv = [entry.local(a) for a in (container.get("command") or entry.command) + (container.get("args") or [])]
        if not argv:
            raise RuntimeError_("the container has no command and the runtime entry none")
        ports = {int(p["containerPort"]): self._port(f"{key[0]}/{key[1]}", int(p["containerPort"]))
                 for p in container.get("ports") or () if p.get("containerPort")}
        env = self._env(container, entry, _owner(pod), meta.get("namespace", "default"), get_object, ports)
        script = directory / "enter.sh"
        script.write_text(_enter_script(mounts, container.get("workingDir") or "/"), encoding="utf-8")
        unshare = shutil.which("unshare")
        if unshare is None:
            raise RuntimeError_("the real-workload runtime needs `unshare` (util-linux) for mount/PID namespaces")
        # SIGKILL when the simulator dies: set by `setpriv --pdeathsig` (util-linux, as unshare), so the child starts
        # without Python code between fork and exec. A preexec_fn makes subprocess fork() instead of vfork(), which
        # runs the pthread_atfork handlers of this process's gRPC (the TGIS servers): its event engine restarts its
        # poller in the child, subprocess then closes the inherited fds, and the poller's epoll_wait gets EBADF and
        # aborts the child (exit 134, "Epoll1Poller ... epoll_wait error: Bad file descriptor"; 139 seen too).
        setpriv = shutil.which("setpriv")
        process = await asyncio.create_subprocess_exec(
            *([setpriv, "--pdeathsig", "KILL"] if setpriv else []),
            unshare, "--mount", "--pid", "--uts", "--fork", "--kill-child", "--propagation", "private",
            "/bin/bash", str(script), str(directory / "rootfs"), hostname, *argv,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=env, preexec_fn=None if setpriv else _die_with_parent)
        fallback = container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
        workload = Workload(key, process, directory, on_line, entry.max_seconds, fallback, ports=ports)
        self.workloads[key] = workload
        task = asyncio.get_running_loop().create_task(workload.run())
        self.tasks.add(task)

        def finished(done: asyncio.Task[Exit]) -> None:
            self.tasks.discard(done)
            if self.workloads.get(key) is workload:
                del self.workloads[key]
            if not done.cancelled() and done.exception() is None:
                on_exit(done.result())

        task.add_done_callback(finished)
        return workload

    def terminate_pod(self, namespace: str, pod: str, grace_seconds: float) -> None:
        for key, workload in list(self.workloads.items()):
            if key[:2] == (namespace, pod):
                workload.terminate(grace_seconds)

    def running(self, namespace: str, pod: str) -> bool:
        return any(key[:2] == (namespace, pod) for key in self.workloads)

    async def shutdown(self) -> None:
        """Kill every process (the simulator stops) and wait for them, briefly."""
        for workload in list(self.workloads.values()):
            workload.kill()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)

    # -- container filesystem -------------------------------------------------------------------------------
    def _mounts(self, pod: dict[str, Any], container: dict[str, Any], entry: RuntimeEntry, directory: Path,
                get_object: Callable[[str, str, str], dict[str, Any] | None]) -> list[tuple[str, str]]:
        """(local source, container path) pairs, in mount order."""
        namespace = pod["metadata"].get("namespace", "default")
        volumes = {v["name"]: v for v in (pod.get("spec") or {}).get("volumes") or ()}
        pod_dir = directory.parent / "volumes"
        mounts: list[tuple[str, str]] = [(entry.local(src), dst) for dst, src in entry.files.items()]
        for mount in container.get("volumeMounts") or ():
            volume = volumes.get(mount["name"])
            if volume is None:
                raise RuntimeError_(f"volumeMount {mount['name']!r}: no volume of that name in the pod")
            source = self._volume(volume, namespace, pod_dir, get_object)
            if mount.get("subPath"):
                source = source / mount["subPath"]
            mounts.append((str(source), mount["mountPath"]))
        path = container.get("terminationMessagePath") or TERMINATION_PATH
        mounts.append((str(directory / "termination-log"), path))
        for local, target in mounts:
            if not Path(local).exists():
                raise RuntimeError_(f"mount {target}: its source {local} does not exist")
            if not target.startswith("/"):
                raise RuntimeError_(f"mount path {target!r} is not absolute")
        return mounts

    def _volume(self, volume: dict[str, Any], namespace: str, pod_dir: Path,
                get_object: Callable[[str, str, str], dict[str, Any] | None]) -> Path:
        name = volume["name"]
        if "hostPath" in volume:  # every simulated node is this machine: the node's path is this host's
            target = Path(volume["hostPath"].get("path") or "/nonexistent")
            if volume["hostPath"].get("type") == "DirectoryOrCreate":
                target.mkdir(parents=True, exist_ok=True)
            return target
        elif "persistentVolumeClaim" in volume:
            target = self.root / "pvc" / namespace / volume["persistentVolumeClaim"]["claimName"]
        elif "emptyDir" in volume:
            target = pod_dir / name
        elif "configMap" in volume or "secret" in volume:
            kind, spec = ("ConfigMap", volume["configMap"]) if "configMap" in volume else ("Secret", volume["secret"])
            obj = get_object(kind, namespace, spec.get("name") or spec.get("secretName") or "")
            if obj is None:
                raise RuntimeError_(f"volume {name!r}: {kind} {namespace}/{spec.get('name') or spec.get('secretName')}"
                                    " not found")
            target = pod_dir / name
            shutil.rmtree(target, ignore_errors=True)
            _write_keys(target, _keys(kind, obj), spec.get("items"))
            return target
        else:
            raise RuntimeError_(f"volume {name!r}: only configMap, secret, emptyDir and persistentVolumeClaim "
                                "volumes (and hostPath: a path of this machine) are supported by the runtime")
        target.mkdir(parents=True, exist_ok=True)
        return target

    def _env(self, container: dict[str, Any], entry: RuntimeEntry, owner: str, namespace: str,
             get_object: Callable[[str, str, str], dict[str, Any] | None], ports: dict[int, int]
             ) -> dict[str, str]:
        """The process's environment. Pods share this machine's network, so a port number is remapped: a
        ``*MASTER_PORT`` to one local port per owner (a job's pods meet there), any other ``*PORT`` variable holding
        a declared container port to this pod's local port for it (the pod is annotated with it: port-forwards and
        the pod's own listener meet there)."""
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
        env.update({k: entry.local(v) for k, v in entry.env.items()})
        for item in container.get("env") or ():
            if "value" in item:
                env[item["name"]] = str(item["value"])
            elif (value := _env_from(item["name"], item.get("valueFrom") or {}, namespace, get_object)) is not None:
                env[item["name"]] = value
        for name, value in env.items():
            if name.endswith("MASTER_PORT") and value.isdigit():
                env[name] = str(self._port(owner, int(value)))
            elif name.endswith("PORT") and value.isdigit() and int(value) in ports:
                env[name] = str(ports[int(value)])
        return env

    def _port(self, owner: str, port: int) -> int:
        """The local port standing for `port` among the pods of `owner` (allocated once, free when allocated)."""
        key = (owner, port)
        if key not in self.ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("127.0.0.1", 0))
                self.ports[key] = probe.getsockname()[1]
        return self.ports[key]


def _env_from(name: str, source: dict[str, Any], namespace: str,
              get_object: Callable[[str, str, str], dict[str, Any] | None]) -> str | None:
    """A variable's value from a Secret's or ConfigMap's key, as the kubelet resolves it (a missing object or key
    is the container's start error, CreateContainerConfigError on a real node); None for other sources (fieldRef,
    resourceFieldRef: not set by the runtime)."""
    for kind, ref_key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
        ref = source.get(ref_key)
        if not ref:
            continue
        obj = get_object(kind, namespace, ref.get("name") or "")
        value = _keys(kind, obj).get(ref.get("key") or "") if obj is not None else None
        if value is None:
            if ref.get("optional"):
                return ""
            raise RuntimeError_(f"env {name}: {kind} {namespace}/{ref.get('name')} key {ref.get('key')!r} not found")
        return value.decode("utf-8", errors="replace")
    return None


def _owner(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    refs = meta.get("ownerReferences") or ()
    return refs[0].get("uid") or refs[0].get("name", "") if refs else f"{meta.get('namespace')}/{meta['name']}"


def _keys(kind: str, obj: dict[str, Any]) -> dict[str, bytes]:
    data: dict[str, bytes] = {}
    if kind == "Secret":
        data.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
        data.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
    else:
        data.update({k: str(v).encode() for k, v in (obj.get("data") or {}).items()})
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return data


def _write_keys(target: Path, data: dict[str, bytes], items: list[dict[str, Any]] | None) -> None:
    target.mkdir(parents=True)
    chosen = {i["key"]: i.get("path", i["key"]) for i in items} if items else {k: k for k in data}
    for key, relative in chosen.items():
        if key not in data:
            raise RuntimeError_(f"key {key!r} is not in the volume's source")
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data[key])


def _enter_script(mounts: list[tuple[str, str]], workdir: str) -> str:
    """Run by `unshare` inside the new namespaces: builds the container's root and execs the command in it."""
    lines = [
        "set -eu", 'root="$1"; hostname "$2"; shift 2', 'mkdir -p "$root"', 'mount -t tmpfs topsail-rootfs "$root"',
        "for top in /*; do",
        '  name="${top#/}"',
        f'  case "$name" in {"|".join(sorted(_SKIPPED_TOPS))}) continue;; esac',
        '  if [ -L "$top" ]; then ln -s "$(readlink "$top")" "$root/$name"; continue; fi',
        '  [ -d "$top" ] || continue',
        '  mkdir "$root/$name"; mount --rbind "$top" "$root/$name"',
        "done",
        'mkdir -p "$root/proc" "$root/sys" "$root/dev/shm" "$root/mnt"',
        'mount -t proc proc "$root/proc"',
        'mount --rbind /sys "$root/sys"',
        'mount -t tmpfs topsail-dev "$root/dev"', 'mkdir -p "$root/dev/shm" "$root/dev/pts"',
        'mount -t tmpfs topsail-shm "$root/dev/shm"',
        'for d in null zero random urandom full tty; do',
        '  [ -e "/dev/$d" ] && touch "$root/dev/$d" && mount --bind "/dev/$d" "$root/dev/$d"',
        "done",
        'ln -s /proc/self/fd "$root/dev/fd"',
    ]
    for source, target in mounts:
        dst = '"$root"' + shlex.quote(target)
        make = f"mkdir -p {dst}" if Path(source).is_dir() else f'mkdir -p "$(dirname {dst})"; touch {dst}'
        lines.append(f"{make}; mount --bind {shlex.quote(source)} {dst}")
    lines.append(f'exec chroot "$root" /bin/sh -c \'cd "$0" && exec "$@"\' {shlex.quote(workdir)} "$@"')
    return "\n".join(lines) + "\n"


def _children(pid: int) -> list[int]:
    """The direct children of `pid` (the container's first process is the child of `unshare`)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the simulator dies, however it dies (Linux); only without `setpriv`
    (a forked child of a process running gRPC threads may abort, see Runtime.start)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
