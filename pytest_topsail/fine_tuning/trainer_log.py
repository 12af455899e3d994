"""Parsing of the trainer's log (HF transformers Trainer / TRL / fms-hf-tuning), robust to what real logs contain.

The trainer's rank 0 prints Python dict reprs, possibly after a tqdm bar (`\r` updates) on the same line:
- progress:  {'loss': 1.2345, 'grad_norm': 0.98, 'learning_rate': 9.5e-06, 'epoch': 0.25} (+ extra keys:
             num_tokens, mean_token_accuracy, entropy, num_input_tokens_seen, ...)
- summary:   {'train_runtime': 123.4, 'train_samples_per_second': 12.3, 'train_steps_per_second': 0.77,
              'train_tokens_per_second': 3456.7, 'train_loss': 1.23, 'epoch': 2.0}
- dataset:   dataset stats: {'total_tokens': 1234, 'total_samples': 10, ...} (our entrypoint's prepare_dataset.py)
Versions differ (tests/fine_tuning/data holds recorded logs of each):
- transformers 4.x: numbers; the summary's train_tokens_per_second is per device (padding included);
  samples/s and steps/s are job-wide.
- transformers 5.x: every value printed as a string ('loss': '6.398'); no train_tokens_per_second in the summary
  (include_tokens_per_second is gone): with include_num_input_tokens_seen the summary carries
  num_input_tokens_seen (gathered over ranks: job-wide) and tokens/s is derived from it and train_runtime; progress
  lines then also carry train_runtime and train_tokens_per_second (job-wide so far), so a progress line is told from
  the summary by its content (a `loss` key vs train_loss / train_samples_per_second), never by train_runtime alone.
  Without include_num_input_tokens_seen the only count is TRL's cumulative `num_tokens` (job-wide, gathered over
  ranks, padding excluded) of the progress lines: tokens/s is the last one's over train_runtime, when that line is
  the end of training (its epoch the summary's).
`TrainerResults.tokens_scope` says which: "device" (x G for the job) or "job".
Device lines (the MFU's peak, pytest_topsail/fine_tuning/efficiency.py): the entrypoint's `nvidia-smi -L`
(`GPU 0: NVIDIA A100-SXM4-80GB (UUID: ...)`) names the pod's GPUs; on a machine without GPUs the real-trainer
preset's trainer prints the peak it measured (`sft: measured peak {'device': 'cpu', 'dtype': 'float32',
'flops_per_second': ...}`).
Lines of ranks other than 0 (`[rank1]:` prefix) are ignored. Values may be nan, inf, None, True/False or numeric
strings: read as such (never through JSON, never eval). A missing summary or dataset statistics line, or two
summaries (a restarted or duplicated run), is one TrainerLogError naming the file and the lines.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError

SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second")
TOKENS_PER_SECOND = "train_tokens_per_second"
TOKENS_SEEN = "num_input_tokens_seen"
_RANK = re.compile(r"^\s*\[(?:rank|default)(?P<rank>\d+)\]:")
DATASET_KEYS = ("total_tokens", "total_samples", "avg_tokens_per_sample", "max_seq_token")
_DICT = re.compile(r"\{\s*'(?P<first>[a-z_]+)'\s*:[^{}]*\}")
_DATASET = re.compile(r"dataset stats:\s*(?P<body>\{[^{}]*\})")
_GPU = re.compile(r"^GPU \d+: (?P<product>.+?) \(UUID: ")
MEASURED_PEAK = "measured peak"
_PEAK = re.compile(MEASURED_PEAK + r"\s*(?P<body>\{[^{}]*\})")
_NAMES = {"nan": math.nan, "inf": math.inf, "None": None, "True": True, "False": False}


class TrainerLogError(TopsailError):
    """The log lacks what the KPIs need; the message names the file and the missing part."""


@dataclass
class Progress:
    step: int  # index of the progress line
    loss: float | None
    grad_norm: float | None
    learning_rate: float | None
    epoch: float | None
    values: dict[str, float | None] = field(default_factory=dict)  # every numeric key of the line


@dataclass
class TrainerResults:
    summary: dict[str, float | None]
    dataset: dict[str, float | None]
    progress: list[Progress] = field(default_factory=list)
    source: str = ""
    tokens_scope: str = "device"  # train_tokens_per_second is per device ("device", 4.x) or the job's ("job", 5.x)
    gpus: list[str] = field(default_factory=list)  # the products `nvidia-smi -L` listed, in order
    measured_peak: dict[str, Any] | None = None  # the peak the trainer measured on a machine without GPUs

    @property
    def trained_tokens(self) -> float | None:
        """The trainer's own count of the tokens it trained on, job-wide, without padding (TRL's `num_tokens`),
        when its last progress line is the end of training (same epoch as the summary); else None."""
        if not self.progress:
            return None
        last, end = self.progress[-1], self.summary.get("epoch")
        value = last.values.get("num_tokens")
        if value is None or not math.isfinite(value) or last.epoch is None or end is None:
            return None
        return value if abs(last.epoch - end) < 1e-6 else None

    def value(self, key: str) -> float | None:
        """A summary or dataset value, None when absent or not a finite number."""
        value = self.summary.get(key, self.dataset.get(key))
        return value if isinstance(value, float) and math.isfinite(value) else None


def parse_literal(text: str) -> dict[str, Any] | None:
    """A flat `{'key': value}` repr -> dict; numbers, strings, nan/inf/None/True/False; None when not that shape."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Dict):
        return None
    result: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        result[key.value] = _value(value)
    return result


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return float(node.value) if isinstance(node.value, int) and not isinstance(node.value, bool) else node.value
    if isinstance(node, ast.Name):
        return _NAMES.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _value(node.operand)
        if isinstance(inner, float):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            try:
                return float(arg.value)
            except ValueError:
                return None
    return None  # a tensor(...) or anything else: not a number we can use


def _number(value: Any) -> float | None:
    """A float, or a numeric string as transformers 5 prints every value ('6.398', 'nan'); else None."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return value if isinstance(value, float) else None


def _is_summary(values: dict[str, Any]) -> bool:
    return "train_runtime" in values and "loss" not in values and (
        "train_loss" in values or "train_samples_per_second" in values)


def parse_text(text: str, source: str = "log") -> TrainerResults:
    """Every progress line, the summary line and the last dataset statistics line of a log."""
    summary: dict[str, Any] | None = None
    summary_line = 0
    dataset: dict[str, Any] | None = None
    progress: list[Progress] = []
    gpus: list[str] = []
    peak: dict[str, Any] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stats = _DATASET.search(line)
        if stats:
            dataset = parse_literal(stats.group("body")) or dataset
            continue
        gpu, measured = _GPU.match(line), _PEAK.search(line)
        if gpu or measured:
            gpus += [gpu.group("product")] if gpu else []
            peak = parse_literal(measured.group("body")) if measured else peak
            continue
        rank = _RANK.match(line)
        if rank and rank.group("rank") != "0":
            continue  # only rank 0's metrics count (the others print none, or the same job-wide values)
        for match in _DICT.finditer(line):
            values = parse_literal(match.group(0))
            if values is None:
                continue
            if _is_summary(values):
                if summary is not None:
                    raise TrainerLogError(f"{source}: two trainer summaries, line {summary_line} and line {number} "
                                          "(a restarted or duplicated training run?); the KPIs would be ambiguous:\n"
                                          f"  | line {summary_line}: {_short(summary)}\n  | line {number}: "
                                          f"{_short(values)}")
                summary, summary_line = values, number
            elif "loss" in values:
                numbers = {k: _number(v) for k, v in values.items()}
                progress.append(Progress(len(progress), numbers.get("loss"), numbers.get("grad_norm"),
                                         numbers.get("learning_rate"), numbers.get("epoch"), numbers))
    missing = []
    if summary is None:
        missing.append("trainer summary line ({'train_runtime': ...})")
    if dataset is None:
        missing.append("dataset statistics line (dataset stats: {'total_tokens': ...})")
    if missing:
        raise TrainerLogError(f"{source}: the log has no {' and no '.join(missing)}; last lines:\n{tail(text)}")
    assert summary is not None and dataset is not None
    results = TrainerResults({k: _number(v) for k, v in summary.items()}, {k: _number(v) for k, v in dataset.items()},
                             progress, source, gpus=gpus, measured_peak=peak)
    if TOKENS_PER_SECOND not in results.summary:
        _derive_tokens_per_second(results)
    absent = [k for k in SUMMARY_KEYS if k not in summary] + [k for k in DATASET_KEYS if k not in dataset]
    if TOKENS_PER_SECOND not in results.summary:
        absent.append(f"{TOKENS_PER_SECOND} (or {TOKENS_SEEN} to derive it: include_num_input_tokens_seen, or TRL's "
                      f"cumulative num_tokens on a last progress line at the end of training{_last_epoch(results)})")
    if absent:
        raise TrainerLogError(f"{source}: the trainer output lacks {', '.join(absent)}")
    return results


def _derive_tokens_per_second(results: TrainerResults) -> None:
    """transformers 5 prints no token rate: the job's, from the tokens seen by every rank
    (include_num_input_tokens_seen, padding included) or else from TRL's cumulative num_tokens at the end of training
    (padding excluded), over train_runtime."""
    summary, runtime = results.summary, results.summary.get("train_runtime")
    tokens = summary[TOKENS_SEEN] if TOKENS_SEEN in summary else results.trained_tokens
    if TOKENS_SEEN in summary or tokens is not None:
        summary[TOKENS_PER_SECOND] = tokens / runtime if tokens is not None and runtime else None
        results.tokens_scope = "job"  # both counts are gathered over every rank


def _last_epoch(results: TrainerResults) -> str:
    if not results.progress or "num_tokens" not in results.progress[-1].values:
        return ""
    last, end = results.progress[-1].epoch, results.summary.get("epoch")
    return f"; the last num_tokens is at epoch {last}, the summary's {end}"


def _short(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())[:200]


def parse_file(path: Path) -> TrainerResults:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise TrainerLogError(f"{path}: the trainer log is missing") from None
    except OSError as exc:
        raise TrainerLogError(f"{path}: the trainer log cannot be read: {exc.strerror or exc}") from None
    return parse_text(text, str(path))


_EXCEPTION = re.compile(r"^(?:\[(?:rank|default)\d+\]:\s*)?(?P<line>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*"
                        r"(?:Error|Exception|Exit|Interrupt|Warning)(?::\s.*)?)\s*$")
# the launchers' own exceptions, raised because the trainer failed: they hide the cause
_WRAPPERS = ("CalledProcessError", "ChildFailedError")


def last_exception(text: str) -> str | None:
    """The last line of the last Python traceback of a log that is not a launcher's wrapper (`ValueError: Target
    modules {...} not found`), None without one."""
    found = None
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = _EXCEPTION.match(line)
        if not match or any(w in line for w in _WRAPPERS) or "Warning" in match.group("line").split(":")[0]:
            continue
        if index and any("Traceback" in x or x.startswith(("  ", "[rank")) for x in lines[max(0, index - 3):index]):
            found = match.group("line").strip()
    return found


def tail(text: str, lines: int = 8) -> str:
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join("  | " + line[-300:] for line in kept) or "  | (empty log)"
