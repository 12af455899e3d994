"""Secret canaries in the configuration, the case settings, labels and a failure message: no output of a run holds
one (saved config, show-config, item files, lts.json, FAILURE, terminal, junit, report, history, OpenMetrics)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

CANARIES = {
    "aws": "AKIA-canary-aws-secret-1",
    "pg": "987654321",
    "pass": "canary-pass-3",
    "phrase": "canary-phrase-4",
    "url": "canary-url-pw-5",
    "token": "canary-token-6",
    "case": "canary-case-7",
    "label": "canary-label-8",
}

CONFIG = f"""
cases: [cases/demo.yaml]
storage:
  aws_secret_access_key: {CANARIES['aws']}
  pg_password: {CANARIES['pg']}
  credentials:
    user: someone
    pass: {CANARIES['pass']}
  passphrase: {CANARIES['phrase']}
  database_url: postgres://someone:{CANARIES['url']}@db.example.com:5432/kpis
  auth:
    token: {CANARIES['token']}
regression:
  comparison_keys: [size]
"""

CASES = f"""
- name: run
  size: [1, 2]
  api_token: {CANARIES['case']}
"""

KPIS = """
from pytest_topsail.kpi import kpi


@kpi(unit="tokens/s", help="Throughput", higher_better=True)
def throughput(data):
    return data["throughput"]
"""

TEST = """
def test_train(case, kpis, topsail_config):
    kpis.record_from({"throughput": 100.0 * case.settings["size"]})
    password = topsail_config.get("storage.pg_password")
    token = case.settings["api_token"]
    print("connecting with", topsail_config.get("storage.database_url"))
    assert case.settings["size"] == 1, f"size 2 refused: password={password} token={token}"
"""

CONFTEST = f"""
def pytest_topsail_labels(item):
    return {{"registry": "https://robot:{CANARIES['label']}@quay.example.com/org",
            "client_secret": "{CANARIES['label']}"}}
"""


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def leaks(data: bytes | str) -> list[str]:
    raw = data.encode() if isinstance(data, str) else data
    return [name for name, value in CANARIES.items() if value.encode() in raw]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("ARTIFACT_DIR", raising=False)
    pytester.makeini("[pytest]\n")
    for relative, text in {"suites/demo/config.yaml": CONFIG, "cases/demo.yaml": CASES, "suites/demo/kpis.py": KPIS,
                           "suites/demo/test_demo.py": TEST, "conftest.py": CONFTEST}.items():
        write(pytester.path, relative, text)
    return pytester


def test_no_output_of_a_run_holds_a_secret(project: pytest.Pytester) -> None:
    artifacts = project.path / "artifacts"
    result = project.runpytest("suites", "-p", "no:cacheprovider", "-rA", "--artifacts", str(artifacts),
                               "--junitxml=junit.xml", "--topsail-history=history.sqlite")
    result.assert_outcomes(passed=1, failed=1)
    assert leaks(result.stdout.str() + result.stderr.str()) == [], result.stdout.str()
    written = [path for path in [*artifacts.rglob("*"), project.path / "junit.xml", project.path / "history.sqlite"]
               if path.is_file()]
    names = {path.name for path in written}
    assert {"config.yaml", "settings.yaml", "item.json", "lts.json", "kpis.json", "FAILURE", "report.html",
            "kpis.prom", "junit.xml", "history.sqlite"} <= names, names
    assert {str(path): leaks(path.read_bytes()) for path in written if leaks(path.read_bytes())} == {}
    shown = project.runpytest("suites", "--topsail-show-config")
    assert shown.ret == 0 and leaks(shown.stdout.str()) == [], shown.stdout.str()
    assert "<redacted>" in (artifacts / "demo/config.yaml").read_text()
