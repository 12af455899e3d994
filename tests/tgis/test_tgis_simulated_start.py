"""The simulated model server's start: download size by dtype and GPTQ, download and load on the profile's time
scale while the times reported stay simulated."""

from __future__ import annotations

import pytest

from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.simulation import (
    DOWNLOAD_SECONDS_ANNOTATION,
    FAILURE_ANNOTATION,
    LOAD_SECONDS_ANNOTATION,
    KServeSimSettings,
    model_annotations,
)
from pytest_topsail.tgis.sizing import download_gb, load_seconds, weights_gb

MIXTRAL = "TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQ"


def container(config: ModelConfig, model: str) -> dict:
    return {"name": "kserve-container", "env": [{"name": k, "value": v} for k, v in config.worker_env(model).items()],
            "resources": config.pod_resources()}


@pytest.mark.parametrize(("dtype", "quantize", "expected_gb"), [
    ("float32", None, 186.8), ("float16", None, 93.4), ("bfloat16", None, 93.4), ("float16", "gptq", 23.35)])
def test_weights_in_memory_follow_the_served_dtype_and_quantization(dtype: str, quantize: str | None,
                                                                    expected_gb: float) -> None:
    config = ModelConfig(dtype_str=dtype, quantize=quantize)
    assert weights_gb(config, "mistralai/Mixtral-8x7B-v0.1") == pytest.approx(expected_gb)
    assert weights_gb(config, MIXTRAL) == pytest.approx(23.35)  # a GPTQ checkpoint holds 4-bit weights


def test_download_is_the_checkpoint_as_stored() -> None:
    assert download_gb("mistralai/Mixtral-8x7B-v0.1") == pytest.approx(93.4)  # bfloat16
    assert download_gb(MIXTRAL) == pytest.approx(23.35)  # GPTQ
    assert download_gb("google/flan-t5-xl") == pytest.approx(12.0)  # float32


def test_download_and_load_run_scaled_and_are_reported_in_simulated_seconds() -> None:
    config = ModelConfig(dtype_str="float16", quantize="gptq")
    settings = KServeSimSettings(time_scale=0.01, storage_gbps=2.0)
    annotations = model_annotations(container(config, MIXTRAL), MIXTRAL, "a100", download=True, settings=settings)
    load = load_seconds(config, "a100", MIXTRAL)
    assert float(annotations[DOWNLOAD_SECONDS_ANNOTATION]) == pytest.approx(11.7, abs=0.05)  # 23.35 GB at 2 GB/s
    assert float(annotations[LOAD_SECONDS_ANNOTATION]) == pytest.approx(load, abs=0.05)
    assert float(annotations["sim.topsail.io/initialize-delay-ms"]) == pytest.approx(117, abs=1)  # 11.7 s x 0.01
    assert float(annotations["sim.topsail.io/ready-delay-ms"]) == pytest.approx(load * 10, abs=1)
    from pytest_topsail.tgis.load_time import pod_load_seconds

    assert pod_load_seconds({"metadata": {"annotations": annotations}}) == pytest.approx(11.7 + load, abs=0.1)
    assert FAILURE_ANNOTATION not in annotations  # 23.35 GB x 1.2 fits one 40 GB A100


def test_a_model_that_does_not_fit_fails_after_the_scaled_load_time() -> None:
    config = ModelConfig(dtype_str="float16")
    model = "mistralai/Mixtral-8x7B-v0.1"
    annotations = model_annotations(container(config, model), model, "a100", download=True,
                                    settings=KServeSimSettings(time_scale=0.02))
    assert "needs" in annotations[FAILURE_ANNOTATION] and annotations["sim.topsail.io/exit-code"] == "1"
    assert float(annotations["sim.topsail.io/duration-seconds"]) < 2.0


def test_a_mixture_of_experts_decodes_at_its_active_size_and_stores_its_full_size() -> None:
    from pytest_topsail.tgis.sizing import active_params_billions, params_billions

    assert params_billions(MIXTRAL) == 46.7 and active_params_billions(MIXTRAL) == 12.9  # top-2 of 8 experts
    assert active_params_billions("EleutherAI/gpt-neox-20b") == params_billions("EleutherAI/gpt-neox-20b") == 20


def test_a_model_the_catalog_does_not_list_fails_to_load_naming_the_closest_known() -> None:
    config = ModelConfig(dtype_str="float16")
    annotations = model_annotations(container(config, "flan-t5-xxxl"), "flan-t5-xxxl", "a100", download=True)
    assert annotations["sim.topsail.io/exit-code"] == "1"
    assert "model 'flan-t5-xxxl' is not in the model catalog" in annotations[FAILURE_ANNOTATION]
    assert "closest known: google/flan-t5-xxl" in annotations[FAILURE_ANNOTATION]


def test_a_declared_model_is_sized_from_its_declaration() -> None:
    settings = KServeSimSettings.model_validate(
        {"models": {"my-org/big-one": {"params_billions": 60, "dtype": "bfloat16"}}})
    config = ModelConfig(dtype_str="float16")
    annotations = model_annotations(container(config, "my-org/big-one"), "big-one", "a100", download=True,
                                    settings=settings)
    assert "(60B parameters, float16)" in annotations[FAILURE_ANNOTATION]  # 144 GB do not fit one A100
    assert float(annotations[DOWNLOAD_SECONDS_ANNOTATION]) == pytest.approx(120.0)  # 120 GB at 1 GB/s
