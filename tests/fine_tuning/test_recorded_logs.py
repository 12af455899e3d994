"""The parser and the failure message on logs recorded from real trainer runs (tests/fine_tuning/data/record.py):
plain TRL 1.16 / transformers 5.24 and fms-hf-tuning 3.2.2 / transformers 4.55.4 (`-fms`), full and LoRA, on a
tiny random Llama-like and Bloom-like model, 1 rank, 2 ranks in one pod, 2 pods, and one failing LoRA point."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_topsail.fine_tuning.metrics import PointMetrics
from pytest_topsail.fine_tuning.run import exit_message
from pytest_topsail.fine_tuning.trainer_log import TrainerLogError, last_exception, parse_file, parse_text

DATA = Path(__file__).parent / "data"
# name -> (GPUs of the job, optimizer steps, summary values as the trainer printed them)
SEEN = "num_input_tokens_seen"
RUNS = {
    "full-llama-1rank": (1, 25, {"train_runtime": 1.691, "train_samples_per_second": 118.3, SEEN: 15448}),
    "lora-bloom-1rank": (1, 25, {"train_runtime": 1.342, "train_samples_per_second": 149.1, SEEN: 15448}),
    "full-bloom-2ranks": (2, 13, {"train_runtime": 1.175, "train_steps_per_second": 11.06, SEEN: 16080}),
    "lora-llama-2pods": (2, 13, {"train_runtime": 5.607, "train_steps_per_second": 2.318, SEEN: 16080}),
}
FMS_RUNS = {name: run for name, run in ((f"{n}-fms", r) for n, r in RUNS.items()) if (DATA / f"{name}.log").exists()}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_transformers_5_logs_parse_with_string_values_and_job_wide_tokens(name):
    gpus, steps, expected = RUNS[name]
    results = parse_file(DATA / f"{name}.log")
    for key, value in expected.items():
        assert results.value(key) == pytest.approx(value)
    assert results.tokens_scope == "job"  # derived from the tokens seen by every rank
    runtime, seen = expected["train_runtime"], expected[SEEN]
    assert results.value("train_tokens_per_second") == pytest.approx(seen / runtime)
    assert len(results.progress) == steps  # logging_steps 1 here: one loss line per step, none taken for a summary
    assert all(p.loss is not None and p.epoch is not None for p in results.progress)
    assert results.value("total_tokens") == 12967  # the formatted text as tokenized by prepare_dataset.py
    metrics = PointMetrics(results, gpus=gpus, epochs=1)
    assert metrics.train_tokens_per_second == pytest.approx(seen / runtime)  # not multiplied by G again
    assert metrics.train_tokens_per_gpu_per_second == pytest.approx(seen / runtime / gpus)
    trained = results.progress[-1].values["num_tokens"]  # the trainer's own count (4 digits printed)
    assert metrics.dataset_tokens_per_second == pytest.approx(trained / runtime)
    assert trained == pytest.approx(12967 if gpus == 1 else 13520, rel=1e-3)  # 2 ranks repeat 8 samples


@pytest.mark.parametrize("name", sorted(FMS_RUNS))
def test_transformers_4_logs_parse_with_per_device_tokens(name):
    gpus, steps, _ = FMS_RUNS[name]
    results = parse_file(DATA / f"{name}.log")
    assert results.tokens_scope == "device"  # the summary's own train_tokens_per_second, per device
    assert len(results.progress) == steps
    per_device = results.value("train_tokens_per_second")
    assert per_device is not None
    metrics = PointMetrics(results, gpus=gpus, epochs=1)
    assert metrics.train_tokens_per_second == pytest.approx(per_device * gpus)
    runtime, samples = results.value("train_runtime"), results.value("train_samples_per_second")
    assert runtime * samples == pytest.approx(200, rel=0.01)  # samples x epochs: job-wide (the reference says so)


def test_two_pods_train_as_one_job():
    """With the training operator's variables, the two pods' launchers form one torchrun rendezvous."""
    assert "sft: world size 2, 200 samples" in (DATA / "lora-llama-2pods.log").read_text()


def test_the_failing_lora_point_names_the_real_cause():
    log = (DATA / "lora-bloom-wrong-modules.log").read_text()
    termination = (DATA / "lora-bloom-wrong-modules.termination").read_text()
    assert "Target modules {'q_proj', 'k_proj'} not found" in termination
    assert "ChildFailedError" in log.splitlines()[-15] or "ChildFailedError" in log  # the launcher's own traceback
    message = exit_message("ft-x-master-0", {"exitCode": 1, "reason": "Error", "message": termination}, log)
    assert message.index("not found in the base model") < message.index("last lines")
    assert "termination message: Exception: NoMatchingPeftModuleError" in message
    with pytest.raises(TrainerLogError, match="no trainer summary line"):
        parse_text(log, "pod.log")


def test_the_failing_fms_point_names_the_real_cause_from_its_log():
    """fms-hf-tuning here left no termination message of its own (the launcher wrote the exit code): the cause is
    the log's last exception, 35 lines before its end, under torchrun's ChildFailedError."""
    name = "lora-bloom-wrong-modules-fms"
    if not (DATA / f"{name}.log").exists():
        pytest.skip("no fms-hf-tuning recording")
    log, termination = (DATA / f"{name}.log").read_text(), (DATA / f"{name}.termination").read_text()
    message = exit_message("ft-x-master-0", {"exitCode": 1, "reason": "Error", "message": termination}, log)
    assert "last exception in the log: ValueError: Target modules {'k_proj', 'q_proj'} not found" in message
    assert "ChildFailedError" not in message.split("last lines:")[0]


def test_without_termination_message_the_last_exception_of_the_log_is_named():
    log = (DATA / "lora-bloom-wrong-modules.log").read_text()
    assert "not found in the base model" in (last_exception(log) or "")
    message = exit_message("ft-x-master-0", {"exitCode": 1, "reason": "Error"}, log)
    assert "last exception in the log:" in message and "Target modules" in message
    assert last_exception("Traceback (most recent call last):\n  File \"x\", line 1\n"
                          "ModuleNotFoundError: No module named 'PIL'\nE1125 failed\n") == \
        "ModuleNotFoundError: No module named 'PIL'"


def test_rank_prefixes_and_duplicate_summaries():
    dataset = ("dataset stats: {'total_tokens': 10, 'total_samples': 1, 'avg_tokens_per_sample': 10, "
               "'max_seq_token': 10}\n")
    summary = ("{'train_runtime': '2.0', 'train_samples_per_second': '1.0', 'train_steps_per_second': '1.0', "
               "'train_loss': '1.0', 'epoch': '1', 'num_input_tokens_seen': 100}\n")
    other_rank = "[rank1]: {'loss': 9.0, 'epoch': 0.5}\n[rank1]: " + summary.replace("2.0", "9.0")
    results = parse_text(dataset + "[rank0]: {'loss': '1.5', 'epoch': '0.5'}\n" + other_rank + summary, "pod.log")
    assert [p.loss for p in results.progress] == [1.5]
    assert results.value("train_tokens_per_second") == 50
    with pytest.raises(TrainerLogError) as error:
        parse_text(dataset + summary + "restarting\n" + summary.replace("2.0", "3.0"), "pod.log")
    assert "two trainer summaries, line 2 and line 4" in str(error.value)
    assert "train_runtime=2.0" in str(error.value) and "train_runtime=3.0" in str(error.value)


def _modelled_log(config: dict, model: str = "bigscience/bloom-560m", pods: int = 1, gpus: int = 1) -> tuple[int, str]:
    from pytest_topsail.fine_tuning.simulation import FineTuningModel, Gpu, Job, plan_training

    settings = FineTuningModel()
    gpu = Gpu("NVIDIA-A100-SXM4-80GB", 80.0, settings.gpus["a100-80gb"])
    base = {"per_device_train_batch_size": 4, "num_train_epochs": 1, "max_seq_length": 512,
            "include_num_input_tokens_seen": True, "peft_method": "none"}
    plan = plan_training(Job({**base, **config}, model, "twitter_complaints_small", 1.0, gpus, pods, 0), gpu,
                         settings, seed=1)
    return plan.exit_code, "".join(line + "\n" for _, line in plan.logs)


def test_the_modelled_log_has_the_real_logs_noise_and_reads_alike():
    """The simulator's trainer log meets the parser with what real logs carry: the launcher line, an argument dump,
    a FutureWarning, tqdm bars with carriage returns before each dict, extra keys, tokens seen in progress lines."""
    code, log = _modelled_log({"logging_steps": 1}, gpus=2)
    recorded = DATA / "full-llama-1rank-fms.log"
    real = recorded.read_bytes().decode() if recorded.exists() else ""  # bytes: keep the carriage returns
    for noise in ("launching: ", "Flat Arguments", "FutureWarning", "\r", "it/s]", "'num_tokens'",
                  "'mean_token_accuracy'", "'num_input_tokens_seen'"):
        assert noise in log, noise
        assert not real or noise in real, noise  # the same noise is in a real log
    assert code == 0
    results = parse_text(log, "modelled")
    assert results.tokens_scope == "device" and len(results.progress) == 13  # 100 samples / (4 x 2 GPUs) steps
    assert results.trained_tokens == results.value("total_tokens")  # one epoch of the dataset


def test_the_modelled_trainer_refuses_lora_modules_the_model_lacks():
    code, log = _modelled_log({"peft_method": "lora", "target_modules": ["q_proj", "k_proj"]})
    assert code == 1
    assert "Target modules {" in log and "not found in the base model" in (last_exception(log) or "")
    assert _modelled_log({"peft_method": "lora", "target_modules": ["query_key_value"]})[0] == 0
