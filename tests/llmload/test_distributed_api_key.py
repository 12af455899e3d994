"""The OpenAI api_key reaches the generator pods through a Secret (secretKeyRef in the Job), never in plaintext:
not in the Job, the ConfigMap, the artifacts, the logs or the terminal (a canary value searched everywhere). The
pods' records reach the runner through pods/portforward, with no directory shared between them."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.kube.client import connect

REPO = Path(__file__).resolve().parents[2]
CANARY = "sk-canary-7f3e9d21c4b8a6e0"


def watch_objects(tmp: Path, seen: dict[str, Any], stop: threading.Event) -> None:
    """The generator Job, its ConfigMap and Secret as the cluster holds them while the point runs."""
    kube = None
    while not stop.wait(0.1) and len(seen) < 3:
        found = sorted(tmp.glob("pytest-topsail-*/**/kubeconfig*"))
        if kube is None and found:
            kube = connect(found[0])
        if kube is None:
            continue
        for kind, api in (("Job", "batch/v1"), ("ConfigMap", "v1"), ("Secret", "v1")):
            for obj in kube.list(api, kind):
                if obj["metadata"]["name"].startswith("llm-load-"):
                    seen.setdefault(kind, obj)


def test_generator_pods_get_the_api_key_from_a_secret(fake_server, tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump([{"name": "keyed", "model": "toy", "backend": "openai", "concurrency": 2,
                                      "duration_s": 1.5}]))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--artifacts",
               str(tmp_path / "artifacts"), "--topsail-history", str(tmp_path / "history.sqlite"), "-m", "llm_load",
               "--preset", "distributed", "--var", f"cases=[{cases}]", "--var", "tests.llm_load.generators=2",
               "--var", "tests.llm_load.serving=endpoint", "--var", f"tests.llm_load.endpoint.http={fake_server.url}",
               "--var", "tests.llm_load.api_key.env=TOPSAIL_TEST_KEY", "--var", "metrics.enabled=false", "-q"]
    env = {**os.environ, "TMPDIR": str(tmp_path), "TOPSAIL_TEST_KEY": CANARY}
    env.pop("ARTIFACT_DIR", None)
    seen: dict[str, Any] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=watch_objects, args=(tmp_path, seen, stop), daemon=True)
    watcher.start()
    try:
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    finally:
        stop.set()
        watcher.join(timeout=10)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert fake_server.requests and set(fake_server.authorizations) == {f"Bearer {CANARY}"}  # every pod's requests
    container = seen["Job"]["spec"]["template"]["spec"]["containers"][0]
    [variable] = [v for v in container["env"] if "valueFrom" in v]
    assert variable["valueFrom"]["secretKeyRef"]["name"] == seen["Secret"]["metadata"]["name"]
    encoded = base64.b64encode(CANARY.encode()).decode()
    assert base64.b64decode(seen["Secret"]["data"][variable["valueFrom"]["secretKeyRef"]["key"]]).decode() == CANARY
    for kind in ("Job", "ConfigMap"):
        assert CANARY not in json.dumps(seen[kind]) and encoded not in json.dumps(seen[kind]), kind
    assert CANARY not in output
    # the records came through the API (pods/portforward to the pods' records port), not a shared directory
    assert container["ports"] == [{"name": "records", "containerPort": 8471, "protocol": "TCP"}]
    assert [v for v in seen["Job"]["spec"]["template"]["spec"]["volumes"] if "hostPath" in v] == []
    [item] = [p for p in (tmp_path / "artifacts" / "llm_load").iterdir() if "__test_llm_load" in p.name]
    collected = sorted((item / "load" / "generators").glob("*.jsonl"))
    assert len(collected) == 2 and all(path.read_text() for path in collected)
    leaks = [str(path) for path in tmp_path.rglob("*")  # artifacts, the simulator's run directory, pod logs
             if path.is_file() and not path.is_symlink() and path.name != "cases.yaml"
             and (CANARY.encode() in path.read_bytes() or encoded.encode() in path.read_bytes())]
    assert leaks == []
