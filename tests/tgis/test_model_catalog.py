"""The model catalog (pytest_topsail/tgis/catalog.py): models found by name or storageUri tail, unknown ones named
with the closest known names, declared ones sized by the simulator as declared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis.catalog import EXTRA_KEY, ServedModel, builtin_catalog, check_case_models, check_sized

REPO = Path(__file__).resolve().parents[2]


def test_every_model_is_found_by_its_full_name_and_by_its_last_part() -> None:
    catalog = builtin_catalog()
    tails = [name.rsplit("/", 1)[-1].lower() for name in catalog.models]
    assert len(tails) == len(set(tails)), "two models share a last part: the simulator sees only the storageUri tail"
    for name, spec in catalog.models.items():
        assert catalog.find(name) == spec and catalog.find(f"s3://models/{name}") == spec
        assert catalog.find(name.upper()) == spec


def test_models_also_in_the_fine_tuning_catalog_have_the_same_size_there() -> None:
    from pytest_topsail.fine_tuning.catalog import builtin_catalog as fine_tuning_catalog

    shared = {name: spec.params_b for name, spec in fine_tuning_catalog().models.items()
              if builtin_catalog().find(name) is not None}
    assert len(shared) >= 8
    assert {name: builtin_catalog().require(name, "x").params_billions for name in shared} == shared


def test_an_unknown_model_names_the_closest_known_and_where_to_declare_it() -> None:
    message = builtin_catalog().unknown("TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQQ")
    assert "closest known: TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQ" in message
    assert f"declare it under {EXTRA_KEY}" in message


def _suite(cluster: str, models: dict | None = None) -> SimpleNamespace:
    document = {EXTRA_KEY: models} if models is not None else {}
    config = SimpleNamespace(source="suites/x/config.yaml", get=lambda key, default=None: document.get(key, default))
    return SimpleNamespace(cluster=cluster, config=config)


def test_a_model_is_checked_where_the_simulator_or_an_in_process_server_sizes_it() -> None:
    with pytest.raises(ValueError, match="model 'my-org/m' is not in the model catalog"):
        check_sized("my-org/m", _suite("sim"))
    assert check_sized("my-org/m", _suite("kube")) is None  # a real cluster serves what it serves
    with pytest.raises(ValueError, match="is not in the model catalog"):
        check_sized("my-org/m", _suite("kube"), in_process=True)
    declared = check_sized("my-org/m", _suite("sim", {"my-org/m": {"params_billions": 2, "dtype": "bfloat16"}}))
    assert declared == ServedModel(params_billions=2, dtype="bfloat16")


def test_the_case_models_of_a_suite_are_checked_naming_the_case() -> None:
    suite = _suite("sim", {"my-org/m": {"params_billions": 2}})
    suite.cases = [SimpleNamespace(source="cases/x.yaml", id="isvc-model=opt-125m", settings={"model": "opt-125m"}),
                   SimpleNamespace(source="cases/x.yaml", id="isvc-model=my-org/m", settings={"model": "my-org/m"})]
    check_case_models(suite)  # a catalog model by its last part, a declared one
    suite.cases.append(SimpleNamespace(source="cases/x.yaml", id="isvc-model=opt-12m", settings={"model": "opt-12m"}))
    with pytest.raises(TopsailError, match=r"^cases/x.yaml: case isvc-model=opt-12m: model 'opt-12m' is not in the "
                                           r"model catalog .*closest known: facebook/opt-125m"):
        check_case_models(suite)
    check_case_models(_suite("kube"))  # a real cluster serves what it serves: its cases are not read
    suite.cases = [SimpleNamespace(source="cases/x.yaml", id="isvc", settings={"name": "isvc"})]
    with pytest.raises(TopsailError, match="case isvc: model: expected the name of a model the simulator serves"):
        check_case_models(suite)


def test_a_declared_model_runs_on_the_simulator_sized_as_declared(tmp_path: Path) -> None:
    """A model the catalog does not list, declared in the suite's configuration: served by a simulated
    InferenceService whose load time follows the declared size."""
    from pytest_topsail.tgis.model_config import load_model_config
    from pytest_topsail.tgis.sizing import download_gb, load_seconds

    model, declared = "my-org/chat-model-2b", ServedModel(params_billions=2.0, dtype="bfloat16")
    server = {"max_batch_size": 8}
    case_file = tmp_path / "cases.yaml"
    case_file.write_text(yaml.safe_dump([{"name": "declared", "model": model, "backend": "tgis", "concurrency": 1,
                                          "duration_s": 1, "server": server}]))
    env = {**os.environ}
    env.pop("ARTIFACT_DIR", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/llm_load", "-p", "no:cacheprovider", "-q", "-p", "no:randomly",
         "--artifacts", str(tmp_path / "artifacts"), "--topsail-history", str(tmp_path / "history.sqlite"),
         "--var", f"cases=[{case_file}]",
         "--var", f"{EXTRA_KEY}={{{model}: {{params_billions: 2.0, dtype: bfloat16}}}}"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout
    item = next(p for p in (tmp_path / "artifacts" / "llm_load").iterdir()
                if p.name.endswith("__test_llm_load_declared"))
    kpis = {k["name"]: k["value"] for k in json.loads((item / "kpis.json").read_text())}
    config = load_model_config(server, "server")
    expected = download_gb(model, declared) / 1.0 + load_seconds(config, "a100", model, declared)  # 1 GB/s storage
    assert kpis["model_load_duration"] == pytest.approx(expected, abs=0.3)
