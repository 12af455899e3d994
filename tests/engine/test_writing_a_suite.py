"""docs/writing-a-suite.md: the suite it walks through is built from the page's code blocks and run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_topsail.tgis.catalog import builtin_catalog

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "writing-a-suite.md"
BLOCK = re.compile(r"^```(?:yaml|python)\n# ((?:suites|cases)/(?:hello|coldstart)/\S+)\n(.*?)^```", re.M | re.S)
CATALOG_BLOCK = re.compile(r"^```text\n# the model catalog\n(.*?)^```", re.M | re.S)


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


def test_the_page_holds_every_file_of_its_suites():
    assert set(doc_files()) == {
        "suites/hello/config.yaml", "suites/hello/settings.py", "suites/hello/conftest.py",
        "suites/hello/test_hello.py", "suites/hello/kpis.py", "cases/hello/default.yaml", "cases/hello/smoke.yaml",
        "suites/coldstart/config.yaml", "suites/coldstart/settings.py", "suites/coldstart/test_coldstart.py",
        "suites/coldstart/kpis.py", "cases/coldstart/default.yaml", "cases/coldstart/smoke.yaml",
    }


def test_the_page_lists_the_model_catalog():
    [listed] = CATALOG_BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert listed.split() == list(builtin_catalog().models)


def kpi_values(item: Path) -> dict[str, float]:
    records = json.loads((item / "kpis.json").read_text())
    return {record["name"]: record["value"] for record in records}


def test_the_served_model_suite_of_the_page_times_its_cold_starts_in_the_clusters_time(hello: Path):
    """The page's InferenceService and ServingRuntime are served by the simulator; the cold start, measured on the
    kserve clock, is in the cluster's time: at least the model's simulated download and load (which the simulator ran
    50 times faster) where the client's clock saw a fraction of it."""
    result = run(hello, "suites/coldstart", "-p", "no:randomly")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "2 passed" in result.stdout
    items = {p.name.split("__", 1)[1]: p for p in (hello / "artifacts" / "coldstart").glob("*__test_cold_start*")}
    assert set(items) == {"test_cold_start_isvc-model=meta-llama_Llama-2-7b-hf",
                          "test_cold_start_isvc-model=facebook_opt-125m"}, sorted(items)
    values = {name.rsplit("_", 1)[-1]: kpi_values(item) for name, item in items.items()}
    for model in values.values():
        assert model["model_load_s"] > 1.0  # simulated seconds, read from the pod
        assert model["cold_start_s"] >= model["model_load_s"], values
    assert values["Llama-2-7b-hf"]["model_load_s"] > 10 * values["opt-125m"]["model_load_s"], values
    assert all((item / "inferenceservice.yaml").is_file() for item in items.values())
    log = "".join((item / "progress.log").read_text() for item in items.values())
    assert "s of cluster time (model download and load" in log, log


def test_a_misspelled_case_model_of_the_served_model_suite_stops_the_run_at_start(hello: Path):
    (hello / "cases" / "coldstart" / "typo.yaml").write_text("- name: isvc\n  model: facebook/opt-12m\n")
    result = run(hello, "suites/coldstart", "--var", "cases=[cases/coldstart/typo.yaml]", "-n", "2")
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    assert ("cases/coldstart/typo.yaml[0]: case isvc: model 'facebook/opt-12m' is not in the model catalog "
            "(pytest_topsail/tgis/catalog.yaml); closest known: facebook/opt-125m") in result.stderr, result.stderr
    assert "Traceback" not in result.stderr + result.stdout


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
