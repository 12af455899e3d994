"""Secret canaries in the configuration (a secret file read through a ``*$@key`` reference too), the case settings,
labels, logs and a failure message: no output of a run holds one (saved config, show-config, item files, lts.json,
FAILURE, terminal, junit, report, history, OpenMetrics)."""

from __future__ import annotations

import textwrap
import threading
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
    "preset": "canary-preset-9",
    "opensearch": "canary-opensearch-10",
    "secret file": "canary-secret-file-11",  # read through a "*$@key" reference, under a key that names no secret
}

CONFIG = f"""
cases: [cases/demo.yaml]
datastore:  # not storage: the plugin validates that section (the storage preparation)
  aws_secret_access_key: {CANARIES['aws']}
  pg_password: {CANARIES['pg']}
  credentials:
    user: someone
    pass: {CANARIES['pass']}
  passphrase: {CANARIES['phrase']}
  database_url: postgres://someone:{CANARIES['url']}@db.example.com:5432/kpis
  auth:
    token: {CANARIES['token']}
  hub_login: "*$@secrets.hub_file"
secrets:
  dir: {{env_key: CANARY_SECRETS_DIR}}
  hub_file: hub_login.txt
regression:
  comparison_keys: [size]
history:
  opensearch: {{url: "http://admin:{CANARIES['opensearch']}@OPENSEARCH", index_prefix: "topsail-", timeout: 5}}
ci_presets:
  secret:
    datastore.passphrase: {CANARIES['preset']}
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
import logging

def test_train(case, kpis, topsail_config):
    kpis.record_from({"throughput": 100.0 * case.settings["size"]})
    password = topsail_config.get("datastore.pg_password")
    token = case.settings["api_token"]
    login = topsail_config.get("datastore.hub_login")
    print("connecting with", topsail_config.get("datastore.database_url"), "as", login)
    logging.getLogger("demo").warning("hub login %s", login)
    assert case.settings["size"] == 1, f"size 2 refused: password={password} token={token} login={login}"
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
    secrets = pytester.path / "secrets"
    secrets.mkdir()
    (secrets / "hub_login.txt").write_text(CANARIES["secret file"] + "\n")
    monkeypatch.setenv("CANARY_SECRETS_DIR", str(secrets))
    pytester.makeini("[pytest]\n")
    for relative, text in {"suites/demo/config.yaml": CONFIG, "cases/demo.yaml": CASES, "suites/demo/kpis.py": KPIS,
                           "suites/demo/test_demo.py": TEST, "conftest.py": CONFTEST}.items():
        write(pytester.path, relative, text)
    return pytester


@pytest.mark.parametrize("history", ["sqlite", "opensearch"])
def test_no_output_of_a_run_holds_a_secret(project: pytest.Pytester, history: str) -> None:
    """Also a preset's value and, with OpenSearch history, the credentials of its URL."""
    from tests.report.test_history import FakeOpenSearch

    server = FakeOpenSearch()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        config = project.path / "suites/demo/config.yaml"
        config.write_text(config.read_text().replace("OPENSEARCH", server.url.removeprefix("http://")))
        artifacts = project.path / "artifacts"
        result = project.runpytest("suites", "-p", "no:cacheprovider", "-rA", "--artifacts", str(artifacts),
                                   "--junitxml=junit.xml", "--preset", "secret",
                                   f"--topsail-history={'history.sqlite' if history == 'sqlite' else 'opensearch'}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    result.assert_outcomes(passed=1, failed=1)
    assert leaks(result.stdout.str() + result.stderr.str()) == [], result.stdout.str()
    written = [path for path in [*artifacts.rglob("*"), project.path / "junit.xml", project.path / "history.sqlite"]
               if path.is_file()]
    names = {path.name for path in written}
    assert {"config.yaml", "settings.yaml", "item.json", "lts.json", "kpis.json", "FAILURE", "report.html",
            "kpis.prom", "junit.xml"} <= names, names
    assert ("history.sqlite" in names) == (history == "sqlite")
    if history == "opensearch":  # the history was there, reached with the URL's credentials
        assert server.indices["topsail-demo"]["docs"] and any(server.auth_headers)
    assert {str(path): leaks(path.read_bytes()) for path in written if leaks(path.read_bytes())} == {}
    shown = project.runpytest("suites", "--topsail-show-config", "--preset", "secret")
    assert shown.ret == 0 and leaks(shown.stdout.str()) == [], shown.stdout.str()
    assert "<redacted>" in (artifacts / "demo/config.yaml").read_text()


SUITE_CANARIES = {  # every place of the repository's suites a user puts a secret
    "worker env": "hf_canary_worker_11",
    "worker env URL": "canary-url-worker-12",
    "OpenAI api key": "sk-canary-api-13",
}


def test_no_output_of_suite_runs_holds_a_secret(tmp_path: Path) -> None:
    """The TGIS and llm_load suites on a cluster given by a kubeconfig (an external simulator, as a real cluster):
    canaries in the TGIS worker's env (a token, URL credentials), the OpenAI backend's api key (from the environment)
    and the kubeconfig's token appear in no artifact (saved manifests, final objects, records, report), the junit
    file or the terminal."""
    import json
    import os
    import subprocess
    import sys

    import yaml

    from pytest_topsail.sim.run.launcher import SimCluster

    repo = Path(__file__).resolve().parents[2]
    worker_env = {"tgis_native|f16": {"HF_TOKEN": SUITE_CANARIES["worker env"],
                                      "MODEL_STORE": f"s3://robot:{SUITE_CANARIES['worker env URL']}@minio:9000/m"}}
    tgis = [{"model": "google/flan-t5-small", "configs": [{"deployment_framework": "tgis_native",
                                                          "dtype_str": "float16"}],
             "cases": ["cases/tgis/flan-t5-small/errors.yaml"]}]
    artifacts, junit = tmp_path / "artifacts", tmp_path / "junit.xml"
    with SimCluster({"node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100"}]},
                    workdir=tmp_path / "cluster") as sim:
        kubeconfig = yaml.safe_load(sim.kubeconfig_path.read_text())
        canaries = {**SUITE_CANARIES, "kubeconfig token": kubeconfig["users"][0]["user"]["token"]}
        command = [sys.executable, "-m", "pytest", "suites", "-m", "tgis or llm_load", "--preset", "smoke",
                   "-k", "test_tgis or openai", "-p", "no:randomly", "-p", "no:cacheprovider", "-rA",
                   f"--kubeconfig={sim.kubeconfig_path}", f"--artifacts={artifacts}", f"--junitxml={junit}",
                   f"--topsail-history={tmp_path / 'history.sqlite'}", "--var", f"tests.tgis={json.dumps(tgis)}",
                   "--var", f"worker.env={json.dumps(worker_env)}", "--var", "tests.llm_load.api_key.env=LLM_KEY"]
        env = {**os.environ, "PYTHONPATH": str(repo), "LLM_KEY": SUITE_CANARIES["OpenAI api key"]}
        env.pop("ARTIFACT_DIR", None)
        env.pop("KUBECONFIG", None)
        result = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "passed" in result.stdout and "llm_load" in result.stdout and "test_tgis" in result.stdout

    def found(data: bytes | str) -> list[str]:
        raw = data.encode() if isinstance(data, str) else data
        return [name for name, value in canaries.items() if value.encode() in raw]

    assert found(output) == [], output[-4000:]
    written = [path for path in [*artifacts.rglob("*"), junit] if path.is_file()]
    assert {"manifests.yaml", "final_objects.yaml", "records.jsonl", "report.html", "junit.xml"} <= \
        {path.name for path in written}
    assert {str(path): found(path.read_bytes()) for path in written if found(path.read_bytes())} == {}
