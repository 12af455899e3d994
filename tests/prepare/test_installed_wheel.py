"""The preparation fixtures ship with the plugin: a project of its own (the TGIS suite copied, no conftest.py, no
fixtures/), with pytest-topsail installed from its wheel into a fresh directory, records a case file with
``--tgis-record`` and then judges it, the workers deployed by the wheel's code on a bare simulator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CASES = """
- name: single
  request:
    params: {method: GREEDY, stopping: {maxNewTokens: 5}}
    request: {text: 'Once upon a time'}
"""


def test_tgis_record_and_workers_from_an_installed_wheel(tmp_path: Path) -> None:
    wheels, site, project = tmp_path / "wheels", tmp_path / "site", tmp_path / "project"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(REPO)], check=True, timeout=600, capture_output=True, cwd=tmp_path)
    [wheel] = wheels.glob("pytest_topsail-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300, capture_output=True)
    shutil.copytree(REPO / "suites" / "tgis", project / "suites" / "tgis",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pytest.ini").write_text("[pytest]\ntopsail_suites = suites\n", encoding="utf-8")
    cases = project / "cases.yaml"
    cases.write_text(textwrap.dedent(CASES).lstrip(), encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if key not in ("ARTIFACT_DIR", "KUBECONFIG", "PYTHONPYCACHEPREFIX") and not key.startswith("PYTEST_XDIST_")}
    env["PYTHONPATH"] = str(site)

    where = subprocess.run([sys.executable, "-c", "import pytest_topsail.prepare.plugin as p; print(p.__file__)"],
                           cwd=project, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert where.stdout.strip().startswith(str(site)), where.stdout  # the wheel's code, not this checkout's

    spec = [{"model": "google/flan-t5-small", "configs": [{"deployment_framework": "tgis_native",
                                                           "dtype_str": "float16"}], "cases": [str(cases)]}]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-q", "--artifacts",
                   str(tmp_path / "artifacts"), "--topsail-history", str(tmp_path / "history.sqlite"), "--var",
                   "tests.tgis=" + json.dumps(spec), "--var", "runner.generate_stream=false", *args]
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)

    recorded = run("--tgis-record")
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-2000:]
    assert f"rewrote 1 case file(s) with the reference's answers:\n  {cases}" in recorded.stdout
    assert "response:" in cases.read_text()
    judged = run()
    assert judged.returncode == 0, judged.stdout[-3000:] + judged.stderr[-2000:]
    assert "1 passed" in judged.stdout
    # the run stood on its preparation: the GPU operator and OpenShift AI (kserve) steps of the wheel's fixtures
    artifacts = tmp_path / "artifacts"  # both runs, numbered on: each prepared its own bare simulator
    assert len(list(artifacts.glob("*__gpu_operator/*__gpu_nodes"))) == 2
    assert len(list(artifacts.glob("*__rhoai/*__datasciencecluster"))) == 2
