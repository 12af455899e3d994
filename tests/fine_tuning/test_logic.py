"""Settings, catalog, memory estimate and KPI formulas of the fine-tuning suite."""

from __future__ import annotations

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning.catalog import builtin_catalog
from pytest_topsail.fine_tuning.estimate import Point, flops_per_token, memory_per_gpu
from pytest_topsail.fine_tuning.metrics import PointMetrics, scaling_efficiency, speedup
from pytest_topsail.fine_tuning.plots import scaling_figure
from pytest_topsail.fine_tuning.point import validate_point
from pytest_topsail.fine_tuning.settings import validate_suite
from pytest_topsail.fine_tuning.trainer_log import TrainerResults


def test_point_settings_validate_and_derive_world_size_and_effective_batch():
    point = validate_point({"model": "ibm-granite/granite-7b-base", "pods": 2, "gpus_per_pod": 4,
                            "per_device_batch_size": 2, "gradient_accumulation_steps": 4,
                            "dataset": {"name": "alpaca", "replication": 0.2},
                            "lora": {"target_modules": "q_proj, v_proj"}}, "cases/x.yaml: case a")
    assert point.world_size == 8
    assert point.effective_batch_size == 2 * 4 * 8
    assert point.dataset.replication == 0.2  # fractions are allowed (TOPSAIL typed it int)
    assert point.lora.target_modules == ["q_proj", "v_proj"]


def test_bad_point_settings_name_the_case_and_key():
    with pytest.raises(TopsailError) as error:
        validate_point({"method": "prefix", "gpus": 2}, "cases/fine_tuning/x.yaml: case dgx")
    message = str(error.value)
    assert message.startswith("cases/fine_tuning/x.yaml: case dgx: invalid point settings: ")
    assert "key method: Input should be 'full', 'lora' or 'qlora'" in message
    assert "key gpus: unknown key" in message
    with pytest.raises(TopsailError, match="preflight"):
        validate_suite({"preflight": "maybe"}, "config.yaml: tests.fine_tuning")


def test_catalog_knows_models_with_registry_suffix_and_can_be_extended():
    catalog = builtin_catalog()
    assert catalog.model("bigscience/bloom-560m@hf").params_b == pytest.approx(0.56)
    with pytest.raises(TopsailError, match="not in the catalog"):
        catalog.model("acme/unknown-1b", "case x")
    extended = catalog.extended({"models": {"acme/unknown-1b": {"params_b": 1, "layers": 16, "hidden": 2048,
                                                                "heads": 16}}}, "config.yaml")
    assert extended.model("acme/unknown-1b").layers == 16
    with pytest.raises(TopsailError, match="config.yaml: key models.bad.layers"):
        catalog.extended({"models": {"bad": {"params_b": 1, "layers": 0, "hidden": 1, "heads": 1}}}, "config.yaml")


def _point(name: str, method: str = "full", world: int = 1, batch: int = 1, seq: int = 512, **kwargs) -> Point:
    return Point(builtin_catalog().model(name), method, world, batch, seq, **kwargs)


def test_memory_estimate_follows_method_sharding_and_sequence():
    seven_b = "ibm-granite/granite-7b-base"
    full_1 = memory_per_gpu(_point(seven_b)).total_gib
    full_8 = memory_per_gpu(_point(seven_b, world=8)).total_gib
    lora_1 = memory_per_gpu(_point(seven_b, "lora")).total_gib
    qlora_1 = memory_per_gpu(_point(seven_b, "qlora")).total_gib
    assert full_1 > 80 > full_8  # 7B full fine-tuning needs FSDP over several 80 GB GPUs
    assert full_1 > lora_1 > qlora_1
    assert 12 < lora_1 < 30
    long = memory_per_gpu(_point(seven_b, "lora", seq=4096)).activations_gib
    flash = memory_per_gpu(_point(seven_b, "lora", seq=4096, flash_attention=True)).activations_gib
    checkpointed = memory_per_gpu(_point(seven_b, "lora", seq=4096, gradient_checkpointing=True)).activations_gib
    assert long > flash > checkpointed
    assert 15 < flash < 25  # ~18 GB for 7B at s 4096, b 1 without the attention scores
    assert "GiB per GPU (model states" in memory_per_gpu(_point(seven_b)).describe()


def test_flops_per_token_full_is_about_six_n_and_lora_less():
    point = _point("ibm-granite/granite-7b-base", seq=512)
    assert flops_per_token(point) / point.params == pytest.approx(6.0, rel=0.05)
    assert flops_per_token(_point("ibm-granite/granite-7b-base", "lora")) < flops_per_token(point)


def _metrics(gpus: int, epochs: float, runtime: float = 100.0, per_device_tps: float = 1000.0) -> PointMetrics:
    results = TrainerResults({"train_runtime": runtime, "train_tokens_per_second": per_device_tps},
                             {"total_tokens": 50_000.0})
    return PointMetrics(results, gpus=gpus, epochs=epochs)


def test_kpi_formulas_count_epochs_and_all_gpus_of_all_pods():
    metrics = _metrics(gpus=8, epochs=2)  # e.g. 2 pods x 4 GPUs
    assert metrics.train_tokens_per_second == 8000.0  # the trainer reports per device
    assert metrics.train_tokens_per_gpu_per_second == 1000.0
    assert metrics.dataset_tokens_per_second == 50_000 * 2 / 100.0  # the dataset is seen once per epoch
    assert metrics.dataset_tokens_per_second_per_gpu == 1000.0 / 8
    assert metrics.gpu_hours_per_million_tokens == pytest.approx(1e6 / 1000.0 / 3600 * 8)


def test_speedup_and_efficiency_have_the_right_direction():
    assert speedup(3000, 1000, higher_better=True) == 3.0  # throughput: more is better
    assert speedup(25, 100, higher_better=False) == 4.0  # runtime: less is better
    assert scaling_efficiency(3000, 1000, 4, 1, higher_better=True) == 0.75
    assert scaling_efficiency(25, 100, 4, 1, higher_better=False) == 1.0


def test_scaling_figure_draws_perfect_scaling_in_the_kpis_direction():
    points = [{"gpus": 1, "value": 100.0, "series": "a"}, {"gpus": 4, "value": 40.0, "series": "a"}]
    runtime = scaling_figure(points, "train_runtime", higher_better=False)
    measured, perfect = runtime["data"]
    assert perfect["y"] == [100.0, 25.0]  # a time divides by the GPU ratio
    assert measured["text"] == ["efficiency 100%", "efficiency 62%"]
    assert "lower is better" in runtime["layout"]["title"]["text"]


def test_lora_target_modules_come_from_the_model_family_and_an_unknown_family_is_one_error():
    catalog = builtin_catalog()
    bloom = validate_point({"model": "bigscience/bloom-560m", "method": "lora"}, "cases/x.yaml: case a")
    assert bloom.resolved(catalog, "where").lora.target_modules == ["query_key_value"]
    given = validate_point({"model": "bigscience/bloom-560m", "method": "lora", "lora": {"target_modules": "dense"}},
                           "w")
    assert given.resolved(catalog, "w").lora.target_modules == ["dense"]
    odd = catalog.extended({"models": {"acme/odd": {"params_b": 1, "layers": 2, "hidden": 64, "heads": 4}}}, "suite")
    point = validate_point({"model": "acme/odd", "method": "lora"}, "cases/x.yaml (case odd)")
    with pytest.raises(TopsailError) as error:
        point.resolved(odd, "cases/x.yaml (case odd)")
    message = str(error.value)
    assert message.startswith("cases/x.yaml (case odd): lora.target_modules is not given")
    assert "models.acme/odd.family" in message and "known families: bloom, gpt_bigcode, llama" in message
    assert validate_point({"model": "acme/odd"}, "w").resolved(odd, "w").method == "full"  # full needs none


def test_trainer_config_has_a_loss_curve_interval_and_the_dataset_template():
    from pytest_topsail.fine_tuning.manifests import trainer_config

    catalog = builtin_catalog()
    smoke = validate_point({"dataset": {"name": "twitter_complaints_small"}, "per_device_batch_size": 4}, "w")
    assert trainer_config(smoke, 100)["logging_steps"] == 1  # 25 steps: every step, not HF's 500
    dgx = validate_point({"dataset": {"name": "alpaca", "replication": 0.5}, "per_device_batch_size": 8,
                          "gpus_per_pod": 2, "epochs": 2}, "w")
    config = trainer_config(dgx, 52002, catalog.dataset_format("alpaca"))
    steps = 2 * -(-26001 // 16)
    assert 18 <= steps // config["logging_steps"] <= 22
    assert "{{instruction}}" in config["data_formatter_template"] and config["response_template"]
    assert trainer_config(validate_point({"logging_steps": 7}, "w"), 100)["logging_steps"] == 7
    assert config["include_num_input_tokens_seen"] is True


def test_a_matrix_over_max_points_is_refused_with_its_point_count_and_a_time_estimate():
    """The refusal says how long the matrix would train, by the same performance model the simulator runs: the
    expected time on the GPUs of the suite's cluster.sim and x time_scale on the simulator; twice the epochs, about
    twice the time; the setting that confirms it named."""
    from types import SimpleNamespace

    from pytest_topsail.fine_tuning.settings import check_points

    def refusal(epochs: list[int], sim: dict) -> str:
        cases = [SimpleNamespace(settings={"model": "bigscience/bloom-560m", "epochs": e, "per_device_batch_size": b},
                                 source="cases/x.yaml", id=f"c-{e}-{b}", name="c")
                 for e in epochs for b in range(1, 11)]
        with pytest.raises(TopsailError) as error:
            check_points(cases, validate_suite({"max_points": 5}, "w"), sim)
        return str(error.value)

    def seconds(text: str) -> float:  # "2.5 days", "27 h 29 min", "3 min 2 s", "4.0 s"
        units = {"days": 86400, "h": 3600, "min": 60, "s": 1}
        words = text.split()
        return sum(float(number) * units[unit] for number, unit in zip(words[::2], words[1::2], strict=True))

    def estimates(message: str) -> tuple[float, float]:
        real, simulated = message.split("training alone takes about ", 1)[1].split(" GPUs by the simulator's", 1)[0], \
            message.split("performance model (", 1)[1].split(" on the simulator", 1)[0]
        return seconds(real.rsplit(" on ", 1)[0]), seconds(simulated)

    sim = {"shape": "dgx", "plugins": {"fine_tuning": {"time_scale": 0.5}}}
    once, twice = refusal([1, 1], sim), refusal([2, 2], sim)
    assert once.startswith("the matrix has 20 points, more than max_points (5): each point is one PyTorchJob; "
                           "training alone takes about ")
    assert once.endswith("set tests.fine_tuning.max_points to at least 20 to run it")
    assert "on a100-80gb GPUs by the simulator's performance model" in once  # the dgx shape's GPUs
    assert "on the simulator at time_scale 0.5, plus each job's start and cleanup" in once
    (real, simulated), (real_twice, _) = estimates(once), estimates(twice)
    assert real_twice == pytest.approx(2 * real, rel=0.05)
    assert simulated == pytest.approx(real * 0.5, rel=0.05)
    assert "on h100 GPUs" in refusal([1, 1], {"gpu_profile": "h100"})
