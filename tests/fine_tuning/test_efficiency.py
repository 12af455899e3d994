"""Efficiency KPIs: MFU against the device's dense peak (a GPU's datasheet, a CPU's measured peak), scaling
efficiency across a matrix's GPU counts, and the token rate of a TRL log that prints none (docs/fine-tuning.md
"Efficiency KPIs")."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from pytest_topsail.fine_tuning.catalog import builtin_catalog
from pytest_topsail.fine_tuning.efficiency import device_peak, measure_matmul_peak, peak_line
from pytest_topsail.fine_tuning.metrics import PointMetrics
from pytest_topsail.fine_tuning.point import save_point, validate_point
from pytest_topsail.fine_tuning.scaling import saved_baseline, smallest_gpus
from pytest_topsail.fine_tuning.simulation import FineTuningModel
from pytest_topsail.fine_tuning.simulation import scaling_efficiency as modelled_scaling
from pytest_topsail.fine_tuning.trainer_log import TrainerLogError, parse_text
from tests.fine_tuning.test_fine_tuning_suite import FAST, item_dirs, kpis_of, output, run_pytest

DATA = Path(__file__).parent / "data"
SUMMARY = re.compile(r"\{'train_runtime'[^{}]*\}")


def without_token_rate(log: str) -> str:
    """A recorded transformers 5 / TRL log as it reads without include_num_input_tokens_seen: no tokens seen, no
    running train_runtime / train_tokens_per_second on the progress lines; TRL's cumulative num_tokens stays."""
    log = re.sub(r", 'num_input_tokens_seen': \d+", "", log)
    return re.sub(r", 'train_runtime': '[^']*', 'train_tokens_per_second': '[^']*'", "", log)


@pytest.mark.parametrize("name, ranks", [("lora-bloom-1rank", 1), ("full-bloom-2ranks", 2)])
def test_a_trl_log_without_a_token_rate_gives_the_last_num_tokens_over_the_runtime(name, ranks):
    log = without_token_rate((DATA / f"{name}.log").read_text())
    assert "num_input_tokens_seen" not in log and "train_tokens_per_second" not in log
    summary = SUMMARY.findall(log)[-1]
    runtime = float(re.search(r"'train_runtime': '([^']+)'", summary).group(1))
    num_tokens = float(re.findall(r"'num_tokens': '([^']+)'", log)[-1])
    results = parse_text(log, name)
    assert results.value("train_tokens_per_second") == pytest.approx(num_tokens / runtime)
    # TRL's num_tokens is gathered over every rank: the job's rate, never x the ranks again
    metrics = PointMetrics(results, gpus=ranks, epochs=1)
    assert metrics.train_tokens_per_second == pytest.approx(num_tokens / runtime)
    assert metrics.train_tokens_per_gpu_per_second == pytest.approx(num_tokens / runtime / ranks)


def test_a_num_tokens_before_the_end_of_training_is_no_rate_and_the_error_says_why():
    log = without_token_rate((DATA / "lora-bloom-1rank.log").read_text())
    last_progress = [line for line in log.splitlines() if "{'loss'" in line][-1]
    with pytest.raises(TrainerLogError, match=r"lacks train_tokens_per_second .*last num_tokens is at epoch 0.96, "
                                              r"the summary's 1.0"):
        parse_text(log.replace(last_progress, ""), "pod.log")


def test_the_device_peak_is_the_gpus_datasheet_for_the_dtype_or_the_measured_cpu_peak():
    base = "dataset stats: {'total_tokens': 10, 'total_samples': 1, 'avg_tokens_per_sample': 10.0, " \
           "'max_seq_token': 10}\n{'train_runtime': 1.0, 'train_samples_per_second': 1.0, " \
           "'train_steps_per_second': 1.0, 'train_tokens_per_second': 10.0, 'epoch': 1.0}\n"
    gpus = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n"
    results = parse_text(gpus + base, "pod.log")
    assert results.gpus == ["NVIDIA H100 80GB HBM3"] * 2
    bf16, tf32 = device_peak(results, "bfloat16"), device_peak(results, "float32")
    assert bf16 is not None and bf16.flops_per_second == 989e12 and not bf16.measured
    assert tf32 is not None and tf32.flops_per_second == pytest.approx(494.7e12)
    assert device_peak(parse_text("GPU 0: Some Future GPU (UUID: GPU-1)\n" + base, "pod.log"), "bfloat16") is None
    measured = parse_text(peak_line("cpu", "float32", 1.25e11, 1) + "\n" + base, "pod.log")
    peak = device_peak(measured, "float32")
    assert peak is not None and peak.measured and peak.flops_per_second == 1.25e11
    assert "measured by the trainer" in peak.describe()
    assert device_peak(measured, "bfloat16") is None  # measured in another dtype: no peak for this one
    assert device_peak(parse_text(base, "pod.log"), "float32") is None


def test_the_cpu_peak_benchmark_is_cheap_and_a_plausible_rate():
    torch = pytest.importorskip("torch", reason="the real-trainer extra is not installed")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        started = time.monotonic()
        flops = measure_matmul_peak("float32")
        took = time.monotonic() - started
    finally:
        torch.set_num_threads(threads)
    assert took < 1.0
    assert 1e9 < flops < 1e13  # one CPU thread: GFLOP/s to a few hundred


def utilisation(log: str, params_b: float, gpus: int, model: FineTuningModel) -> float:
    """The utilisation the simulator's performance model configures for a point (fine_tuning/simulation.py):
    mfu_max x t/(t + mfu_tokens_half) x N/(N + mfu_params_half_b) x its multi-GPU scaling efficiency, with t the
    padded tokens of one micro-batch = per-device tokens/s over micro-steps/s (no gradient accumulation)."""
    summary = SUMMARY.findall(log)[-1]
    per_device = float(re.search(r"'train_tokens_per_second': ([0-9.e+-]+)", summary).group(1))
    steps = float(re.search(r"'train_steps_per_second': ([0-9.e+-]+)", summary).group(1))
    tokens = per_device / steps
    return (model.mfu_max * tokens / (tokens + model.mfu_tokens_half) * params_b / (params_b + model.mfu_params_half_b)
            * modelled_scaling(model, params_b, gpus, 1))


def test_mfu_on_the_dgx_preset_is_the_models_utilisation_and_scaling_efficiency_is_reported(tmp_path):
    model_name = "bigcode/gpt_bigcode-santacoder"
    cases = [{"name": "dgx", "model": model_name, "dataset": {"name": "alpaca", "replication": 0.5},
              "method": "full", "gpus_per_pod": [1, 2, 4, 8], "per_device_batch_size": 8, "max_seq_length": 512}]
    # the performance model without its throughput noise (1% by default): the utilisation it configures, exactly
    plugin = "{time_scale: 0.00005, startup_s: 30, save_s: 5, noise: 0}"
    result, artifacts = run_pytest(tmp_path, "--preset", "dgx", FAST[1],
                                   f"--var=cluster.sim.plugins.fine_tuning={plugin}", cases=cases)
    assert result.returncode == 0, output(result)
    dirs = item_dirs(artifacts)
    assert len(dirs) == 4, sorted(dirs)
    params_b, model = builtin_catalog().model(model_name, "test").params_b, FineTuningModel()
    by_gpus = {}
    for directory in dirs.values():
        kpis = kpis_of(directory)
        gpus = kpis["mfu"]["labels"]["accelerator_count"]
        by_gpus[gpus] = kpis
        expected = 100 * utilisation((directory / "pod.log").read_text(), params_b, gpus, model)
        assert kpis["mfu"]["value"] == pytest.approx(expected, rel=0.01), gpus
        assert kpis["mfu"]["unit"] == "%" and kpis["mfu"]["higher_better"] is True
        assert kpis["device_peak_tflops"]["value"] == 312  # the A100's dense bf16 peak
    assert sorted(by_gpus) == [1, 2, 4, 8]
    assert "scaling_efficiency" not in by_gpus[1]  # the baseline itself
    base = by_gpus[1]["train_tokens_per_second"]["value"]
    for gpus in (2, 4, 8):
        efficiency = by_gpus[gpus]["scaling_efficiency"]
        assert efficiency["scope"] == "run" and efficiency["labels"]["baseline_accelerator_count"] == 1
        assert 0 < efficiency["value"] <= 1
        tokens = by_gpus[gpus]["train_tokens_per_second"]["value"]
        assert efficiency["value"] == pytest.approx(tokens / (gpus * base))
        # the model's own scaling efficiency (the micro-batch's padding differs a little with the GPU count)
        assert efficiency["value"] == pytest.approx(modelled_scaling(model, params_b, gpus, 1), rel=0.01)
    figures = {p.name: json.loads(p.read_text()) for p in (artifacts / "fine_tuning" / "figures").glob("*.json")}
    scaling = next(f for name, f in figures.items() if "scaling_efficiency" in name)
    measured, perfect = scaling["data"]
    assert measured["x"] == [2, 4, 8] and perfect["y"] == [1.0, 1.0]
    assert measured["y"] == pytest.approx([by_gpus[g]["scaling_efficiency"]["value"] for g in (2, 4, 8)])
    mfu = next(f for name, f in figures.items() if "MFU" in name)
    assert mfu["data"][0]["y"] == pytest.approx([by_gpus[g]["mfu"]["value"] for g in (1, 2, 4, 8)])


def test_the_baseline_is_the_groups_point_at_its_smallest_gpu_count_once_it_has_a_result(tmp_path):
    catalog = builtin_catalog()
    base = {"model": "bigscience/bloom-560m", "method": "full", "per_device_batch_size": 8}
    cases = [{**base, "gpus_per_pod": gpus} for gpus in (2, 4, 8)] + [{**base, "per_device_batch_size": 4,
                                                                       "gpus_per_pod": 1}]
    eight = validate_point({**base, "gpus_per_pod": 8}, "test")
    assert smallest_gpus(eight, cases, catalog) == 2  # the batch-4 point at 1 GPU is another group
    log = (DATA / "full-bloom-2ranks.log").read_text()
    items = {name: tmp_path / name for name in ("001__two", "002__two-batch-4", "003__eight")}
    for directory in items.values():
        directory.mkdir()
    other_group = validate_point({**base, "per_device_batch_size": 4, "gpus_per_pod": 2}, "test")
    save_point(other_group, items["002__two-batch-4"])
    (items["002__two-batch-4"] / "pod.log").write_text(log)
    save_point(validate_point({**base, "gpus_per_pod": 2}, "test"), items["001__two"])
    assert saved_baseline(items["003__eight"], eight, 2) is None  # started, no log yet (or failed before one)
    (items["001__two"] / "pod.log").write_text("Traceback (most recent call last):\nRuntimeError: NCCL timeout\n")
    assert saved_baseline(items["003__eight"], eight, 2) is None  # failed: no summary, no baseline
    (items["001__two"] / "pod.log").write_text(log)
    baseline = saved_baseline(items["003__eight"], eight, 2)
    assert baseline is not None and baseline.gpus == 2
    assert baseline.tokens_per_second == pytest.approx(parse_text(log, "log").value("train_tokens_per_second"))
