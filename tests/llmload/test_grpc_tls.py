"""TGIS gRPC over TLS from the load settings (grpc_ca_file, grpc_server_name): a local TLS server on 127.0.0.1
whose certificate a CA made in the test signed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_topsail.llmload.run import run_load_test
from pytest_topsail.llmload.settings import case_load_settings

FakeTgis = Any  # tests/llmload/conftest.py

REPO = Path(__file__).resolve().parents[2]


def run(fake: FakeTgis, root: Path, stream: bool = True, **tls: Any) -> dict[str, Any]:
    settings = case_load_settings({"model": "m", "backend": "tgis", "streaming": stream, "concurrency": 2,
                                   "requests": 6, "timeout_s": 5, "max_prompts": 2, **tls}, "case tls", {})
    backend = settings.make_backend(grpc_target=fake.target, rootdir=root)
    return run_load_test(backend, settings.prompts(root), [settings.load_point()], root / "load")[0]


@pytest.mark.parametrize("stream", [True, False])
def test_grpc_over_tls_with_the_case_ca(tls_tgis: tuple[FakeTgis, Path], stream: bool) -> None:
    fake, root = tls_tgis
    summary = run(fake, root, stream, grpc_ca_file="ca.pem")
    assert summary["succeeded"] == summary["requests"] == 6 and summary["failures"] == {}


def test_without_the_ca_or_with_another_name_every_request_fails(tls_tgis: tuple[FakeTgis, Path]) -> None:
    fake, root = tls_tgis
    plaintext = run(fake, root)
    assert plaintext["succeeded"] == 0 and set(plaintext["failures"]) == {"UNAVAILABLE"}
    renamed = run(fake, root, grpc_ca_file="ca.pem", grpc_server_name="inference.example.com")
    assert renamed["succeeded"] == 0 and set(renamed["failures"]) == {"UNAVAILABLE"}  # not the certificate's name
    assert fake.calls == 0
    named = run(fake, root, grpc_ca_file="ca.pem", grpc_server_name="localhost")  # a name the certificate holds
    assert named["succeeded"] == 6


def test_a_missing_ca_file_is_a_start_up_error(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump([{"name": "tls", "model": "m", "backend": "tgis", "concurrency": 1,
                                      "duration_s": 1, "grpc_ca_file": "no/such/ca.pem"}]))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/llm_load", "--collect-only", "-q",
               "--artifacts", str(tmp_path / "artifacts"), "--var", f"cases=[{cases}]"]
    env = {**os.environ}
    env.pop("ARTIFACT_DIR", None)
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "case tls: grpc_ca_file" in output and "no/such/ca.pem: not found" in output
    assert "Traceback" not in output
