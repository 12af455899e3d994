"""LLM serving load generator: closed loop at constant concurrency, open loop at a constant or Poisson rate, sweeps,
over TGIS gRPC or OpenAI-compatible HTTP backends (docs/llm-load.md).

The front: suites use the names of ``__all__`` (``from pytest_topsail.llmload import run_load_test``), never a module
of the package: a case's load settings (``LoadSettings``, ``case_load_settings``, ``check_server``, ``SERVER_KEY``,
``check_generator_image``: the simulator runs the generator pods' image),
one load test in this process (``run_load_test``) or spread over generator pods (``GeneratorPool``,
``run_distributed``, ``CA_FILE``), sweeps (``AutoSweep``), and the analysis of a load test's records into
per-point statistics and figures (``analyse_directory``, ``merge_directories``, ``summarize_point``, ``STATISTICS``,
``figures``) and their raw samples (``measured_successes``, ``latency_samples``: what a comparison of runs
bootstraps), and the serving pod's own view of a point (``ServerSampler``: its /metrics scraped during the point,
saved as ``SERVER_METRICS``), and whether a point's figures can be trusted (``audit_point``). Names load on first
use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_topsail.fronts import lazy_front

# public name -> module defining it
_EXPORTS = {
    "CA_FILE": "pytest_topsail.llmload.distributed",
    "GeneratorPool": "pytest_topsail.llmload.distributed",
    "run_distributed": "pytest_topsail.llmload.distributed",
    "failure_message": "pytest_topsail.llmload.distributed",
    "audit_point": "pytest_topsail.llmload.audit",
    "AutoSweep": "pytest_topsail.llmload.generator",
    "STATISTICS": "pytest_topsail.llmload.metrics",
    "summarize_point": "pytest_topsail.llmload.metrics",
    "latency_samples": "pytest_topsail.llmload.metrics",
    "measured_successes": "pytest_topsail.llmload.metrics",
    "figures": "pytest_topsail.llmload.plots",
    "analyse_directory": "pytest_topsail.llmload.run",
    "merge_directories": "pytest_topsail.llmload.run",
    "run_load_test": "pytest_topsail.llmload.run",
    "SERVER_METRICS": "pytest_topsail.llmload.server_metrics",
    "ServerSampler": "pytest_topsail.llmload.server_metrics",
    "SERVER_KEY": "pytest_topsail.llmload.settings",
    "LoadSettings": "pytest_topsail.llmload.settings",
    "case_load_settings": "pytest_topsail.llmload.settings",
    "check_server": "pytest_topsail.llmload.settings",
    "check_generator_image": "pytest_topsail.llmload.settings",
}
__all__ = [
    "AutoSweep", "CA_FILE", "GeneratorPool", "LoadSettings", "SERVER_KEY", "SERVER_METRICS", "STATISTICS",
    "ServerSampler", "analyse_directory", "audit_point", "case_load_settings", "check_generator_image",
    "check_server", "figures", "latency_samples", "failure_message", "measured_successes", "merge_directories",
    "run_distributed", "run_load_test", "summarize_point",
]

if TYPE_CHECKING:
    from pytest_topsail.llmload.audit import audit_point
    from pytest_topsail.llmload.distributed import CA_FILE, GeneratorPool, failure_message, run_distributed
    from pytest_topsail.llmload.generator import AutoSweep
    from pytest_topsail.llmload.metrics import STATISTICS, latency_samples, measured_successes, summarize_point
    from pytest_topsail.llmload.plots import figures
    from pytest_topsail.llmload.run import analyse_directory, merge_directories, run_load_test
    from pytest_topsail.llmload.server_metrics import SERVER_METRICS, ServerSampler
    from pytest_topsail.llmload.settings import (
        SERVER_KEY,
        LoadSettings,
        case_load_settings,
        check_generator_image,
        check_server,
    )

__getattr__, __dir__ = lazy_front(__name__, _EXPORTS)
