"""The peak a fine-tuning point's MFU is measured against (docs/fine-tuning.md "Efficiency KPIs"): the dense peak of
one of its devices for the point's dtype.

- A GPU: the first product the entrypoint's `nvidia-smi -L` listed in the master's log, its datasheet peak for the
  dtype from pytest_topsail/hardware.py (bfloat16/float16 tensor cores; float32 as TF32). A product hardware.py does
  not know gives no peak (no MFU), never a guess.
- No GPU (the real-trainer preset: one trainer rank per "GPU", on CPU): the peak the trainer measured at its start
  with :func:`measure_matmul_peak` in its dtype and printed (`sft: measured peak {...}`): the best rate of repeated
  square matmuls on the rank's threads, a measured figure of this machine at that moment (stated as such in the KPI's
  help and the report), not a datasheet value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pytest_topsail.fine_tuning.trainer_log import MEASURED_PEAK, TrainerResults
from pytest_topsail.hardware import profile_of_label, sanitize_label_value
from pytest_topsail.waiting import Deadline

BENCHMARK_SECONDS = 0.25  # of matmuls, after one warm-up: the trainer's start-up grows by about this
BENCHMARK_SIZE = 512  # square matrices: 268 MFLOP per product, milliseconds on one CPU thread


@dataclass(frozen=True)
class DevicePeak:
    device: str  # the GPU product as nvidia-smi names it, or "cpu"
    dtype: str
    flops_per_second: float  # of one device: a GPU, or one trainer rank on CPU
    measured: bool  # True: measured by the trainer at its start; False: the GPU's datasheet value

    def describe(self) -> str:
        source = "measured by the trainer" if self.measured else "datasheet"
        return f"{self.device} {self.dtype} peak {self.flops_per_second / 1e12:.4g} TFLOP/s ({source})"


def device_peak(results: TrainerResults, dtype: str) -> DevicePeak | None:
    """The dense peak of one device of the point whose master log gave `results` (see the module's docstring); None
    when the log names no GPU hardware.py knows and the trainer measured no peak in `dtype`."""
    if results.gpus:
        profile = profile_of_label(sanitize_label_value(results.gpus[0]))
        tflops = profile.dense_peak_tflops(dtype) if profile is not None else 0.0
        return DevicePeak(results.gpus[0], dtype, tflops * 1e12, measured=False) if tflops else None
    measured = results.measured_peak or {}
    value = measured.get("flops_per_second")
    if isinstance(value, float) and value > 0 and measured.get("dtype") == dtype:
        return DevicePeak(str(measured.get("device") or "cpu"), dtype, value, measured=True)
    return None


def measure_matmul_peak(dtype: str, seconds: float = BENCHMARK_SECONDS, size: int = BENCHMARK_SIZE) -> float:
    """FLOP/s of this process's CPU threads in `dtype` (a torch dtype name): the best of repeated `size` x `size`
    matmuls over about `seconds` after a warm-up (at least two), i.e. the peak a trainer rank can reach here."""
    import torch

    kind = getattr(torch, dtype)
    left, right = torch.randn(size, size).to(kind), torch.randn(size, size).to(kind)
    torch.matmul(left, right)  # warm-up: allocation, the library's kernel choice
    best, runs, measuring = 0.0, 0, Deadline(seconds, clock=time.perf_counter)
    while runs < 2 or not measuring.expired():
        start = time.perf_counter()
        torch.matmul(left, right)
        best = max(best, 2.0 * size**3 / max(time.perf_counter() - start, 1e-9))
        runs += 1
    return best


def peak_line(device: str, dtype: str, flops_per_second: float, threads: int) -> str:
    """The line the trainer prints with its measured peak, as trainer_log reads it."""
    values: dict[str, Any] = {"device": device, "dtype": dtype, "flops_per_second": float(flops_per_second),
                              "threads": threads, "seconds": BENCHMARK_SECONDS}
    return f"sft: {MEASURED_PEAK} {values!r}"
