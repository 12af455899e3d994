"""The TGIS suite run as a user runs it (a subprocess on the simulator): divergence caught with field-level diffs,
record mode, one deployment per worker under xdist, and bad input as one message naming file and key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "cases" / "tgis" / "flan-t5-small"
REFERENCE = {"deployment_framework": "tgis_native", "dtype_str": "float16"}
BF16 = {"deployment_framework": "tgis_native", "dtype_str": "bfloat16"}


def run_pytest(tmp: Path, *args: str, timeout: float = 300, where: tuple[str, ...] = ("suites/tgis",)
               ) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", *where, "-p", "no:cacheprovider", "-q", "-rfs",
               "--artifacts", str(tmp / "artifacts"), "--topsail-history", str(tmp / "history.sqlite"), *args]
    env = {**os.environ}
    env.pop("ARTIFACT_DIR", None)
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env)


def specs(configs: list[dict], cases: str, **extra: object) -> str:
    return "tests.tgis=" + json.dumps([{"model": "google/flan-t5-small", "configs": configs, "cases": [cases],
                                        **extra}])


def test_divergent_config_fails_only_its_affected_cases_with_field_diffs(tmp_path: Path) -> None:
    env = 'worker.env={"tgis_native|bf16": {"TOPSAIL_TGIS_DIVERGE": "1"}}'
    result = run_pytest(tmp_path, "--var", specs([REFERENCE, BF16], "cases/tgis/flan-t5-small/basic.yaml"),
                        "--var", env)
    output = result.stdout
    assert result.returncode == 1, output[-3000:] + result.stderr[-2000:]
    failed = sorted(line.split("[", 1)[1].split("]", 1)[0] for line in output.splitlines()
                    if line.startswith("FAILED"))
    assert failed and all(node.startswith("flan-t5-small/tgis_native|bf16/") for node in failed), failed
    # text-bearing cases differ; the unseeded one is only checked to succeed
    assert "flan-t5-small/tgis_native|bf16/greedy-basic" in failed
    assert "flan-t5-small/tgis_native|bf16/greedy-basic/stream" in failed  # one text: a streaming twin, failing too
    assert "flan-t5-small/tgis_native|bf16/greedy-batch/stream" not in failed  # two texts: no twin
    assert "flan-t5-small/tgis_native|bf16/sampling-unseeded" not in failed
    assert "flan-t5-small/tgis_native|bf16/sampling-unseeded/stream" not in failed
    assert "responses[0].text: expected '" in output
    assert "<redacted>" not in output + result.stderr  # no secret was set: every failure message reads whole
    assert "stream (merged) responses[0].text: expected '" in output
    assert "13 failed, 17 passed" in output  # every reference case passes, and the unseeded one of bf16


def test_record_then_run_passes(tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    for source in CASES.glob("*.yaml"):
        cases = yaml.safe_load(source.read_text())
        for case in cases:
            case.pop("response", None)
            case.pop("error", None)
        (folder / source.name).write_text(yaml.safe_dump(cases))
    spec = specs([REFERENCE, BF16], f"{folder}/*.yaml")
    before = run_pytest(tmp_path, "--var", spec)
    assert before.returncode == 0, before.stdout[-3000:]
    # 11 cases, 10 of them with one text (streaming twins), on 2 configs: reported as skipped, never passed
    assert "42 skipped" in before.stdout and "no expectation yet" in before.stdout
    recorded = run_pytest(tmp_path, "--var", spec, "--tgis-record")
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    assert "11 passed" in recorded.stdout  # reference config recorded; the other config skipped
    assert "rewrote 2 case file(s) with the reference's answers:" in recorded.stdout
    assert f"  {folder / 'basic.yaml'}" in recorded.stdout and f"  {folder / 'errors.yaml'}" in recorded.stdout
    errors = yaml.safe_load((folder / "errors.yaml").read_text())
    assert errors[0]["error"] == {"code": "INVALID_ARGUMENT", "message": "top_p must be > 0.0 and <= 1.0"}
    after = run_pytest(tmp_path, "--var", spec)
    assert after.returncode == 0, after.stdout[-3000:]
    assert "36 passed" in after.stdout  # 11 cases and 7 twins (the 3 error cases have none) per config


def test_each_worker_is_deployed_once_under_xdist(tmp_path: Path) -> None:
    sharded = {**REFERENCE, "num_shard": 2, "resources": {"gpu": 2}}
    result = run_pytest(tmp_path, "-n", "3", "-vv", "--var", specs([REFERENCE, BF16, sharded],
                                                                 "cases/tgis/flan-t5-small/errors.yaml"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "9 passed" in result.stdout
    processes: dict[str, set[str]] = {}  # worker (model/config) -> the xdist processes that ran its items
    for line in result.stdout.splitlines():
        if line.startswith("[gw") and "PASSED" in line and "test_tgis[" in line:
            worker = line.split("test_tgis[", 1)[1].split("]", 1)[0].rsplit("/", 1)[0]
            processes.setdefault(worker, set()).add(line.split("]", 1)[0])
    assert len(processes) == 3 and all(len(ran) == 1 for ran in processes.values()), processes
    audit = [json.loads(line) for line in (tmp_path / "artifacts" / "001__cluster" / "audit.jsonl").open()]
    created = [entry for entry in audit if entry["verb"] == "create" and entry["resource"] == "inferenceservices"
               and entry["code"] == 201]
    assert len(created) == 3  # one per (model, config), whatever the number of xdist workers
    # each removed after its last item, by the process that ran its group, its objects saved first
    deleted = [entry for entry in audit if entry["verb"] == "delete" and entry["resource"] == "inferenceservices"]
    assert len({entry["name"] for entry in deleted}) == 3
    steps = sorted((tmp_path / "artifacts").glob("*__tgis_worker_*"))
    assert len(steps) == 3
    for step in steps:
        timeline = json.loads((step / "deployment.json").read_text())
        assert timeline["began"] < timeline["ready"] < timeline["removed"]
        assert "kind: InferenceService" in (step / "final_objects.yaml").read_text()
        assert list(step.glob("*.kserve-container.log"))
    progress = "".join(path.read_text() for path in (tmp_path / "artifacts").rglob("progress.log"))
    assert progress.count("removed after its last item") == 3


def test_a_model_that_does_not_fit_fails_within_seconds_naming_the_cause_once(tmp_path: Path) -> None:
    spec = "tests.tgis=" + json.dumps([{"model": "EleutherAI/gpt-neox-20b", "configs": [REFERENCE],
                                        "cases": ["cases/tgis/flan-t5-small/errors.yaml"]}])
    began = time.monotonic()
    result = run_pytest(tmp_path, "--var", spec, "--var", "worker.ready_timeout_s=180", timeout=170)
    elapsed = time.monotonic() - began
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    # not the 180 s ready timeout (counted from the worker's creation): FailedToLoad is raced; ~25 s quiet, more at load
    assert elapsed < 170, elapsed
    cause = "FailedToLoad: ModelLoadFailed model gpt-neox-20b (20B parameters, float16) needs 44.7 GiB per GPU"
    assert cause in output and "more than one NVIDIA A100-SXM4-40GB GPU" in output
    assert "During handling of the above exception" not in output
    failures = [path.read_text() for path in (tmp_path / "artifacts" / "tgis").glob("*/FAILURE")]
    assert failures and all(text.count(cause) == 1 for text in failures), failures[:1]


def test_deselected_suites_shape_nothing_the_same_cluster_and_failure_under_m_tgis(tmp_path: Path) -> None:
    """`pytest -m tgis` from the rootdir collects every suite but only the TGIS suite may shape the run: the same
    simulated cluster as `pytest suites/tgis`, so a model too big for the suite's 40 GB A100s fails the same way."""
    spec = "tests.tgis=" + json.dumps([{"model": "EleutherAI/gpt-neox-20b", "configs": [REFERENCE],
                                        "cases": ["cases/tgis/flan-t5-small/errors.yaml"]}])
    runs = {}
    for label, where in (("suite", ("suites/tgis",)), ("marker", ("-m", "tgis"))):
        result = run_pytest(tmp_path / label, "--var", spec, where=where, timeout=120)
        runs[label] = (result, (tmp_path / label / "artifacts" / "001__cluster" / "profile.yaml").read_text())
        assert result.returncode == 1, result.stdout[-3000:]
        assert "needs 44.7 GiB per GPU with num_shard=1, more than one NVIDIA A100-SXM4-40GB GPU" in result.stdout
        assert "3 failed" in result.stdout
    assert runs["marker"][1] == runs["suite"][1]  # the same simulated cluster: node pools, GPUs, plugins
    assert yaml.safe_load(runs["marker"][1])["node_pools"][0]["count"] == 2  # the TGIS suite's own 2 nodes
    assert "deselected" in runs["marker"][0].stdout  # the other suites were collected, then deselected


def test_secrets_in_worker_env_stay_out_of_saved_manifests_and_objects(tmp_path: Path) -> None:
    canaries = {"HF_TOKEN": "hf_canary_token_1", "HUGGING_FACE_HUB_TOKEN": "canary-hub-2",
                "DB_PASSWORD": "canary-pw-3", "MODEL_STORE": "s3://robot:canary-url-4@minio.example:9000/models"}
    env = "worker.env=" + json.dumps({"tgis_native|f16": canaries})
    result = run_pytest(tmp_path, "--var", specs([REFERENCE], "cases/tgis/flan-t5-small/errors.yaml"), "--var", env)
    assert result.returncode == 0, result.stdout[-3000:]
    steps = list((tmp_path / "artifacts").glob("*__tgis_worker_*"))
    assert len(steps) == 1 and (steps[0] / "manifests.yaml").is_file() and (steps[0] / "final_objects.yaml").is_file()
    secrets = ("hf_canary_token_1", "canary-hub-2", "canary-pw-3", "canary-url-4")
    for path in (tmp_path / "artifacts").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [secret for secret in secrets if secret.encode() in data], path
    assert not [secret for secret in secrets if secret in result.stdout + result.stderr]
    manifests = (steps[0] / "manifests.yaml").read_text()
    assert "name: HF_TOKEN\n" in manifests and "value: <redacted>" in manifests
    assert "s3://<redacted>@minio.example:9000/models" in manifests
    assert "name: MAX_NEW_TOKENS" in manifests and "value: '1024'" in manifests  # not a secret: kept


def write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


BAD_INPUTS = [
    ("flash attention needs float16/bfloat16",
     lambda tmp: specs([REFERENCE, {"flash_attention": True, "dtype_str": "float32"}],
                       "cases/tgis/flan-t5-small/*.yaml"),
     ["tests.tgis", "flash_attention requires dtype_str float16 or bfloat16"]),
    ("sharding needs as many GPUs", lambda tmp: specs([{"num_shard": 2}], "cases/tgis/flan-t5-small/*.yaml"),
     ["tests.tgis", "num_shard 2 requires a non-MIG gpu count equal to num_shard"]),
    ("both response and error",
     lambda tmp: specs([REFERENCE], write(tmp, "both.yaml", "- name: x\n  request: {request: {text: hi}}\n"
                                                           "  response: {responses: [{text: a}]}\n"
                                                           "  error: {code: INVALID_ARGUMENT, message: m}\n")),
     ["both.yaml[0] (case 'x')", "has both response and error"]),
    ("unknown parameter with strict_case_keys",
     lambda tmp: specs([REFERENCE], write(tmp, "param.yaml", "- name: x\n  request:\n    params: {stoping: {}}\n"
                                                            "    request: {text: hi}\n"), strict_case_keys=True),
     ["param.yaml: unknown key(s) (strict_case_keys is set): [0] (case 'x'): request.params.stoping"]),
    ("malformed case file",
     lambda tmp: specs([REFERENCE], write(tmp, "broken.yaml", "- name: x\n  request: [unclosed\n")),
     ["broken.yaml", "malformed YAML"]),
    ("unknown gRPC code name",
     lambda tmp: specs([REFERENCE], write(tmp, "code.yaml", "- name: x\n  request: {request: {text: hi}}\n"
                                                           "  error: {code: NOT_A_CODE, message: m}\n")),
     ["code.yaml[0] (case 'x')", "error.code", "'NOT_A_CODE' is not a gRPC code name"]),
    ("missing case file", lambda tmp: specs([REFERENCE], "cases/tgis/none/*.yaml"),
     ["tests.tgis", "cases/tgis/none/*.yaml"]),
]


@pytest.mark.parametrize(("make", "expected"), [pytest.param(make, expected, id=name)
                                                 for name, make, expected in BAD_INPUTS])
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_bad_input_is_one_message_naming_file_and_key(tmp_path: Path, make, expected, workers) -> None:
    result = run_pytest(tmp_path, "--var", make(tmp_path), *workers, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output[-2000:]
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-2000:]
    for fragment in expected:
        assert fragment in output, (fragment, output[-2000:])
    assert not (tmp_path / "artifacts" / "001__cluster").exists()  # nothing started
