"""Parsing of the trainer's log (HF transformers Trainer / fms-hf-tuning), robust to what real logs contain.

The trainer prints Python dict reprs, possibly after a `[rank0]:` prefix or a tqdm bar on the same line:
- progress:  {'loss': 1.2345, 'grad_norm': 0.98, 'learning_rate': 9.5e-06, 'epoch': 0.25}
- summary:   {'train_runtime': 123.4, 'train_samples_per_second': 12.3, 'train_steps_per_second': 0.77,
              'train_tokens_per_second': 3456.7, 'train_loss': 1.23, 'epoch': 2.0}
- dataset:   dataset stats: {'total_tokens': 1234, 'total_samples': 10, 'avg_tokens_per_sample': 123.4,
              'max_seq_token': 512}
Values may be nan, inf, -inf, None, True/False: they are read as such (never through JSON, never eval).
A missing summary or dataset statistics line is one TrainerLogError naming the file, what is missing and the last
lines of the log.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError

SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_tokens_per_second")
DATASET_KEYS = ("total_tokens", "total_samples", "avg_tokens_per_sample", "max_seq_token")
_DICT = re.compile(r"\{\s*'(?P<first>[a-z_]+)'\s*:[^{}]*\}")
_DATASET = re.compile(r"dataset stats:\s*(?P<body>\{[^{}]*\})")
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


@dataclass
class TrainerResults:
    summary: dict[str, float | None]
    dataset: dict[str, float | None]
    progress: list[Progress] = field(default_factory=list)
    source: str = ""

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
    return value if isinstance(value, float) else None


def parse_text(text: str, source: str = "log") -> TrainerResults:
    """Every progress line, the last summary line and the last dataset statistics line of a log."""
    summary: dict[str, Any] | None = None
    dataset: dict[str, Any] | None = None
    progress: list[Progress] = []
    for line in text.splitlines():
        stats = _DATASET.search(line)
        if stats:
            dataset = parse_literal(stats.group("body")) or dataset
            continue
        for match in _DICT.finditer(line):
            values = parse_literal(match.group(0))
            if values is None:
                continue
            if "train_runtime" in values:
                summary = values
            elif "loss" in values:
                progress.append(Progress(len(progress), _number(values.get("loss")), _number(values.get("grad_norm")),
                                         _number(values.get("learning_rate")), _number(values.get("epoch"))))
    missing = []
    if summary is None:
        missing.append("trainer summary line ({'train_runtime': ...})")
    if dataset is None:
        missing.append("dataset statistics line (dataset stats: {'total_tokens': ...})")
    if missing:
        raise TrainerLogError(f"{source}: the log has no {' and no '.join(missing)}; last lines:\n{tail(text)}")
    absent = [k for k in SUMMARY_KEYS if k not in summary] + [k for k in DATASET_KEYS if k not in dataset]  # type: ignore[operator]
    if absent:
        raise TrainerLogError(f"{source}: the trainer output lacks {', '.join(absent)}")
    return TrainerResults({k: _number(v) for k, v in summary.items()},  # type: ignore[union-attr]
                          {k: _number(v) for k, v in dataset.items()}, progress, source)  # type: ignore[union-attr]


def parse_file(path: Path) -> TrainerResults:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise TrainerLogError(f"{path}: the trainer log is missing") from None
    except OSError as exc:
        raise TrainerLogError(f"{path}: the trainer log cannot be read: {exc.strerror or exc}") from None
    return parse_text(text, str(path))


def tail(text: str, lines: int = 8) -> str:
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join("  | " + line[-300:] for line in kept) or "  | (empty log)"
