"""``python -m pytest_topsail.sim``: bad input is one clear message and exit != 0; SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

TIMEOUT = 60


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_topsail.sim", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=cwd)


def _assert_one_clear_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("python -m pytest_topsail.sim: error: ")
    assert result.stderr.count("error: ") == 1, result.stderr  # one message (a YAML error may quote lines)
    for fragment in fragments:
        assert fragment in result.stderr


def test_malformed_profile_yaml(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("node_pools: [unclosed\n")
    _assert_one_clear_error(_run("--profile", str(profile), cwd=tmp_path), str(profile), "not valid YAML")


def test_profile_with_an_unknown_key(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("node_pools:\n- name: gpu\n  count: 1\n  colour: blue\n")
    _assert_one_clear_error(_run("--profile", str(profile), cwd=tmp_path), "node_pools[0].colour", "unknown key")


def test_missing_profile_file(tmp_path: Path) -> None:
    _assert_one_clear_error(_run("--profile", str(tmp_path / "nope.yaml"), cwd=tmp_path), "nope.yaml",
                            "cannot be read")


def test_unknown_gpu_profile(tmp_path: Path) -> None:
    _assert_one_clear_error(_run("--gpu-profile", "z9000", cwd=tmp_path), "z9000")


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        _assert_one_clear_error(_run("--port", port, "--nodes", "0", cwd=tmp_path), f"--port {port}", "cannot listen")
    assert not (tmp_path / "topsail-sim.kubeconfig").exists()


def test_unwritable_kubeconfig(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "kubeconfig"
    _assert_one_clear_error(_run("--kubeconfig", str(target), cwd=tmp_path), "--kubeconfig", "does not exist")


def test_kubeconfig_path_is_a_directory(tmp_path: Path) -> None:
    _assert_one_clear_error(_run("--kubeconfig", str(tmp_path), cwd=tmp_path), "is a directory")


def test_unwritable_audit_log(tmp_path: Path) -> None:
    _assert_one_clear_error(_run("--audit-log", str(tmp_path / "missing" / "audit.jsonl"), cwd=tmp_path),
                            "--audit-log")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_directory(tmp_path: Path) -> None:
    read_only = tmp_path / "ro"
    read_only.mkdir()
    read_only.chmod(0o500)
    _assert_one_clear_error(_run("--kubeconfig", str(read_only / "kc"), cwd=tmp_path), "not writable")


def test_serves_then_stops_on_sigterm_and_removes_its_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    process = subprocess.Popen([sys.executable, "-m", "pytest_topsail.sim", "--nodes", "1", "--kubeconfig",
                                str(kubeconfig)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not kubeconfig.exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "no kubeconfig"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert stdout.startswith("topsail-sim: serving https://127.0.0.1:")
    assert not kubeconfig.exists()
    assert "Traceback" not in stderr


def test_help_lists_the_options(tmp_path: Path) -> None:
    result = _run("--help", cwd=tmp_path)
    assert result.returncode == 0
    for option in ("--profile", "--nodes", "--gpu-profile", "--gpus-per-node", "--port", "--kubeconfig",
                   "--audit-log", "--seed"):
        assert option in result.stdout
    assert "--parent-pipe" not in result.stdout
