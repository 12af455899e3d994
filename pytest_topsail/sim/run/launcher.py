"""Start the simulated cluster as a subprocess and stop it: ``SimCluster``.

```python
with SimCluster({"node_pools": [{"name": "gpu", "count": 4, "gpu_profile": "h100"}]}, audit_log=True) as sim:
    kubernetes.config.load_kube_config(str(sim.kubeconfig_path))
    ...
```

The child never outlives its parent: it holds the read end of a pipe whose only write end stays in this process and
stops when the pipe reaches EOF (however the parent died), and, when started from the main thread on Linux, it also
asks the kernel for SIGTERM on the parent's death (``prctl(PR_SET_PDEATHSIG)``; that signal follows the *thread* that
started the child, hence main thread only).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.errors import TopsailError
from pytest_topsail.waiting import Deadline

ProfileSource = str | os.PathLike | Mapping[str, Any] | None
_OUTPUT_TAIL_LINES = 20


class SimCluster:
    """One simulator process (``python -m pytest_topsail.sim``) with its kubeconfig, log and audit log.

    ``profile``: a profile file path (read and checked by the child), a ``Profile``, a mapping (built into a ``Profile``
    here: a mistake raises ``TopsailError`` before any process starts) or None (defaults). A built profile, with the
    shortcuts applied, goes to the child as ``<workdir>/profile.json``, read back as is (sim/run/profile.py
    ``write_built``). ``audit_log``: True for ``<workdir>/audit.jsonl``, a path, or None/False.
    ``workdir``: where the kubeconfig, ``sim.log`` (the child's stdout and stderr) and the profile go; by default a
    temporary directory removed by ``stop()``.
    """

    def __init__(self, profile: ProfileSource | Any = None, *, nodes: int | None = None,
                 gpu_profile: str | None = None, gpus_per_node: int | None = None, seed: int | None = None,
                 preinstalled: str | None = None, port: int = 0, workdir: str | os.PathLike | None = None,
                 audit_log: bool | str | os.PathLike | None = None, start_timeout: float = 60.0,
                 stop_timeout: float = 10.0, log_level: str = "WARNING", extra_args: tuple[str, ...] = ()) -> None:
        self._profile = profile
        self._shortcuts = {"--nodes": nodes, "--gpu-profile": gpu_profile, "--gpus-per-node": gpus_per_node,
                           "--seed": seed, "--preinstalled": preinstalled}
        self._port = port
        self._requested_workdir = Path(workdir) if workdir is not None else None
        self._audit_option = audit_log
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._log_level = log_level
        self._extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe_write: int | None = None
        self._ready_read: int | None = None
        self._owns_workdir = False
        self.workdir: Path | None = None
        self.kubeconfig_path: Path | None = None
        self.audit_log_path: Path | None = None
        self.output_path: Path | None = None
        self.url: str | None = None
        self.returncode: int | None = None

    # ----------------------------------------------------------------- lifecycle
    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> SimCluster:
        """Start the child and wait (``start_timeout``) until it has written its kubeconfig; returns self."""
        if self._process is not None:
            raise RuntimeError("SimCluster.start() called twice")
        self._prepare_workdir()
        try:
            self._spawn()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; removes a temporary workdir. Returns the exit code."""
        process, self._process = self._process, None
        if process is not None:
            self.returncode = _terminate(process, self.stop_timeout)
        for fd in (self._pipe_write, self._ready_read):
            if fd is not None:
                os.close(fd)
        self._pipe_write = self._ready_read = None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._owns_workdir = False
        return self.returncode

    def environ(self) -> dict[str, str]:
        """Environment variables pointing kubectl and clients at this cluster."""
        if self.kubeconfig_path is None:
            raise RuntimeError("the simulated cluster is not started")
        return {"KUBECONFIG": str(self.kubeconfig_path)}

    def output(self) -> str:
        """What the child printed so far (stdout and stderr); never contains the token."""
        if self.output_path is None or not self.output_path.exists():
            return ""
        return self.output_path.read_text(encoding="utf-8", errors="replace")

    # ----------------------------------------------------------------- internals
    def _prepare_workdir(self) -> None:
        if self._requested_workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="topsail-sim-"))
            self._owns_workdir = True
        else:
            self.workdir = self._requested_workdir.absolute()
            try:
                self.workdir.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise TopsailError(f"simulated cluster workdir {self.workdir}: cannot be created: "
                                   f"{error.strerror or error}") from None
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self.output_path = self.workdir / "sim.log"
        if self._audit_option is True:
            self.audit_log_path = self.workdir / "audit.jsonl"
        elif self._audit_option:
            self.audit_log_path = Path(self._audit_option).absolute()
        self.kubeconfig_path.unlink(missing_ok=True)

    def _profile_args(self) -> list[str]:
        """The child's profile options: the user's file and shortcuts as given, or the profile built here."""
        profile = self._profile
        if profile is None or isinstance(profile, (str, os.PathLike)):
            args = ["--profile", str(Path(profile).absolute())] if profile is not None else []
            return args + [str(part) for option, value in self._shortcuts.items() if value is not None
                           for part in (option, value)]
        from pytest_topsail.sim.controllers.profile import Profile
        from pytest_topsail.sim.run.profile import build_profile, write_built

        if not isinstance(profile, Profile):
            data = profile.to_dict() if hasattr(profile, "to_dict") else dict(profile)
            profile = build_profile(data, source="simulated cluster profile")
        shortcuts: dict[str, Any] = {option.lstrip("-").replace("-", "_"): value
                                     for option, value in self._shortcuts.items()}
        profile = profile.with_overrides(**shortcuts)
        assert self.workdir is not None
        path = self.workdir / "profile.json"
        write_built(profile, path)
        return ["--built-profile", str(path)]

    def command(self, parent_pipe: int | None = None, ready_fd: int | None = None) -> list[str]:
        """The command line of the child (without the private parent-watch and readiness options when
        ``parent_pipe`` / ``ready_fd`` are None)."""
        assert self.kubeconfig_path is not None
        args = [sys.executable, "-m", "pytest_topsail.sim", "--port", str(self._port),
                "--kubeconfig", str(self.kubeconfig_path), "--log-level", self._log_level]
        args += self._profile_args()
        if self.audit_log_path is not None:
            args += ["--audit-log", str(self.audit_log_path)]
        if parent_pipe is not None:
            args += ["--parent-pipe", str(parent_pipe)]
            if threading.current_thread() is threading.main_thread():
                args.append("--parent-death-signal")
        if ready_fd is not None:
            args += ["--ready-fd", str(ready_fd)]
        return args + list(self._extra_args)

    def _spawn(self) -> None:
        assert self.output_path is not None
        read_end, write_end = os.pipe()  # both non-inheritable; the child gets read_end through pass_fds only
        self._pipe_write = write_end
        ready_read, ready_write = os.pipe()  # the child says "ready" on ready_write; EOF alone: it exited
        self._ready_read = ready_read
        try:
            args = self.command(parent_pipe=read_end, ready_fd=ready_write)
            with open(self.output_path, "wb") as output:
                self._process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=output,
                                                 stderr=subprocess.STDOUT, pass_fds=(read_end, ready_write),
                                                 start_new_session=True)
        finally:
            os.close(read_end)
            os.close(ready_write)

    def _wait_ready(self) -> None:
        """Wait for the child's "ready" line on the readiness pipe (no polling); EOF without it: the child exited."""
        assert self._process is not None and self.kubeconfig_path is not None and self._ready_read is not None
        deadline = Deadline(self.start_timeout)
        received = b""
        try:
            while b"\n" not in received:
                readable, _, _ = select.select([self._ready_read], [], [], deadline.left())
                if not readable:
                    raise TopsailError(f"the simulated cluster did not write its kubeconfig {self.kubeconfig_path} "
                                       f"within {self.start_timeout:g} s; its output:\n{self._output_tail()}")
                chunk = os.read(self._ready_read, 64)
                if not chunk:
                    code = self._process.wait(self.stop_timeout)
                    raise TopsailError(f"the simulated cluster exited with code {code} before it was ready:\n"
                                       f"{self._output_tail()}")
                received += chunk
        finally:
            os.close(self._ready_read)
            self._ready_read = None
        document = yaml.safe_load(self.kubeconfig_path.read_text(encoding="utf-8"))
        self.url = document["clusters"][0]["cluster"]["server"]

    def _output_tail(self) -> str:
        lines = self.output().splitlines()[-_OUTPUT_TAIL_LINES:]
        return "\n".join(lines) if lines else "(no output)"


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()
