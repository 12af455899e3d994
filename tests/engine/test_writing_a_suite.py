"""docs/writing-a-suite.md: the suite it walks through is built from the page's code blocks and run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "writing-a-suite.md"
BLOCK = re.compile(r"^```(?:yaml|python)\n# ((?:suites|cases)/hello/\S+)\n(.*?)^```", re.M | re.S)


def doc_files() -> dict[str, str]:
    return {path: body for path, body in BLOCK.findall(DOC.read_text(encoding="utf-8"))}


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for path, body in doc_files().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    (root / "conftest.py").write_text((REPO / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\ntopsail_suites = suites\n", encoding="utf-8")
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ARTIFACT_DIR", None)
    env.pop("TOPSAIL_PRESET", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--artifacts", str(root / "artifacts"),
               "--topsail-history", str(root / "history.sqlite"), *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=240, env=env)


def test_the_page_holds_every_file_of_the_suite():
    assert set(doc_files()) == {
        "suites/hello/config.yaml", "suites/hello/settings.py", "suites/hello/conftest.py",
        "suites/hello/test_hello.py", "suites/hello/kpis.py", "cases/hello/default.yaml", "cases/hello/smoke.yaml",
    }


def test_the_suite_of_the_page_runs_and_reports_its_kpis(hello: Path):
    result = run(hello, "suites/hello")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout
    items = sorted((hello / "artifacts" / "hello").glob("*__test_create*"))
    assert [p.name.split("__", 1)[1] for p in items] == ["test_create_configmaps-objects=5",
                                                         "test_create_configmaps-objects=20"]
    kpis = json.loads((items[1] / "kpis.json").read_text())
    names = {k["name"]: k for k in kpis["kpis"]} if isinstance(kpis, dict) else {k["name"]: k for k in kpis}
    assert set(names) >= {"create_p50_ms", "create_per_s"}
    assert names["create_p50_ms"]["unit"] == "ms" and names["create_p50_ms"]["value"] > 0
    assert "created 20/20 ConfigMaps" in (items[1] / "progress.log").read_text()
    assert list(hello.glob("artifacts/*__hello_namespace"))


def test_the_smoke_preset_from_the_environment_equals_the_option(hello: Path):
    by_option = run(hello, "suites/hello", "--preset", "smoke", "--co", "-q")
    env_run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/hello", "--co", "-q"], cwd=hello,
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "TOPSAIL_PRESET": "smoke"})
    assert "test_create[configmaps]" in by_option.stdout
    assert by_option.stdout.splitlines()[0] == env_run.stdout.splitlines()[0]


def test_bad_settings_end_the_run_at_start_naming_the_key(hello: Path):
    result = run(hello, "suites/hello", "--var", "tests.hello.max_create_ms=-1", "-n", "2")
    assert result.returncode == 4
    assert ("suites/hello/config.yaml: invalid settings: key tests.hello.max_create_ms: Input should be greater "
            "than 0") in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
