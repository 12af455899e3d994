"""Trainer log parsing on excerpts in the real trainer formats (HF Trainer / fms-hf-tuning)."""

from __future__ import annotations

import math

import pytest

from pytest_topsail.fine_tuning.trainer_log import TrainerLogError, parse_file, parse_text

DATASET = ("dataset stats: {'total_tokens': 1048576, 'total_samples': 5200, 'avg_tokens_per_sample': 201.65, "
           "'max_seq_token': 512}\n")
PROGRESS = (
    "{'loss': 1.8213, 'grad_norm': 3.4375, 'learning_rate': 9.938441702975689e-06, 'epoch': 0.25}\n"
    "[rank0]: {'loss': 1.2035, 'grad_norm': 2.125, 'learning_rate': 7.5e-06, 'epoch': 0.5}\n"
    " 50%|█████     | 163/326 [01:02<01:01,  2.65it/s]{'loss': nan, 'grad_norm': nan, 'learning_rate': 5e-06, "
    "'epoch': 1.0}\n"
)
SUMMARY = ("{'train_runtime': 124.5678, 'train_samples_per_second': 83.49, 'train_steps_per_second': 2.617, "
           "'train_tokens_per_second': 8421.7, 'train_loss': 1.4021, 'epoch': 2.0}\n")


def test_summary_progress_and_dataset_are_read():
    results = parse_text("Loading checkpoint shards: 100%\n" + DATASET + PROGRESS + SUMMARY, "pod.log")
    assert results.value("train_runtime") == pytest.approx(124.5678)
    assert results.value("train_tokens_per_second") == pytest.approx(8421.7)
    assert results.value("total_tokens") == 1048576
    assert results.value("max_seq_token") == 512
    assert [p.loss for p in results.progress][:2] == [1.8213, 1.2035]
    assert math.isnan(results.progress[2].loss)  # a nan loss is kept as nan, in the curve, not an error
    assert [p.epoch for p in results.progress] == [0.25, 0.5, 1.0]


def test_nan_inf_and_none_in_the_summary_are_not_numbers():
    summary = ("{'train_runtime': 10.0, 'train_samples_per_second': inf, 'train_steps_per_second': None, "
               "'train_tokens_per_second': nan, 'train_loss': -inf, 'epoch': 1.0}\n")
    results = parse_text(DATASET + summary, "pod.log")
    assert results.value("train_runtime") == 10.0
    assert results.value("train_samples_per_second") is None
    assert results.value("train_steps_per_second") is None
    assert results.value("train_tokens_per_second") is None


def test_missing_summary_names_the_file_and_shows_the_last_lines(tmp_path):
    log = tmp_path / "pod.log"
    log.write_text(DATASET + PROGRESS + "torch.distributed.elastic.multiprocessing.errors.ChildFailedError\n")
    with pytest.raises(TrainerLogError) as error:
        parse_file(log)
    message = str(error.value)
    assert str(log) in message
    assert "the log has no trainer summary line" in message
    assert "trainer summary line ({'train_runtime': ...})" in message
    assert "ChildFailedError" in message  # the end of the log is in the message
    assert "dataset statistics" not in message


def test_missing_dataset_statistics_and_missing_keys_are_named():
    with pytest.raises(TrainerLogError, match="dataset statistics line"):
        parse_text(PROGRESS + SUMMARY, "pod.log")
    with pytest.raises(TrainerLogError, match="lacks train_tokens_per_second"):
        parse_text(DATASET + "{'train_runtime': 1.0, 'train_samples_per_second': 1.0, 'train_steps_per_second': 1.0, "
                             "'epoch': 1.0}\n", "pod.log")


def test_missing_log_file_is_one_clear_error(tmp_path):
    with pytest.raises(TrainerLogError, match="pod.log: the trainer log is missing"):
        parse_file(tmp_path / "pod.log")


def test_code_in_the_log_is_never_evaluated():
    results = parse_text(DATASET + "{'loss': __import__('os').getcwd(), 'epoch': 1.0}\n" + SUMMARY, "pod.log")
    assert results.progress[0].loss is None
