"""TGIS serving: the `fmaas` gRPC protocol, an asyncio client, tgis-tester's ModelConfig and a reference server.

The front: suites and fixture modules use the names of ``__all__`` (``from pytest_topsail.tgis import TgisClient``),
never a module of the package: TGIS case files (``load_case_file``, ``TgisCase``), the client (``TgisClient``), the
evaluation of answers against expectations (``compare``, ``merge_stream``, ``stream_problems``, ``response_dict``,
``record_expectation``), model configurations (``ModelConfig``, ``load_model_config``, ``ENV_OF_FIELD``), the
models the simulator can serve (``suite_catalog``, ``check_sized``, ``check_case_models``, ``check_gpu_profile``),
the reference server (``ServerSettings``, ``ServerThread``, ``start_server``), the worker and runner settings, and
a pod's model load time (``pod_load_seconds``). Names load on first use: importing grpc costs time only for suites
that serve TGIS. docs/tgis.md describes the modules behind them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pytest_topsail.fronts import lazy_front

# gRPC core logs a normal end of a channel at INFO on stderr, into pytest's output (a GOAWAY when a worker's server
# stops: Ctrl-C, a worker removed); errors only, unless the user chose a verbosity. Before any module here imports grpc.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# public name -> module defining it
_EXPORTS = {
    "TgisCase": "pytest_topsail.tgis.casefile",
    "load_case_file": "pytest_topsail.tgis.casefile",
    "check_case_models": "pytest_topsail.tgis.catalog",
    "check_sized": "pytest_topsail.tgis.catalog",
    "suite_catalog": "pytest_topsail.tgis.catalog",
    "TgisClient": "pytest_topsail.tgis.client",
    "compare": "pytest_topsail.tgis.evaluation",
    "merge_stream": "pytest_topsail.tgis.evaluation",
    "response_dict": "pytest_topsail.tgis.evaluation",
    "stream_problems": "pytest_topsail.tgis.evaluation",
    "check_gpu_profile": "pytest_topsail.tgis.latency",
    "pod_load_seconds": "pytest_topsail.tgis.load_time",
    "ENV_OF_FIELD": "pytest_topsail.tgis.model_config",
    "ModelConfig": "pytest_topsail.tgis.model_config",
    "load_model_config": "pytest_topsail.tgis.model_config",
    "record_expectation": "pytest_topsail.tgis.recording",
    "ServerSettings": "pytest_topsail.tgis.server",
    "ServerThread": "pytest_topsail.tgis.server",
    "start_server": "pytest_topsail.tgis.server",
    "RunnerSettings": "pytest_topsail.tgis.settings",
    "WorkerSettings": "pytest_topsail.tgis.settings",
}
__all__ = [
    "ENV_OF_FIELD", "ModelConfig", "RunnerSettings", "ServerSettings", "ServerThread", "TgisCase", "TgisClient",
    "WorkerSettings", "check_gpu_profile", "check_sized", "compare", "load_case_file", "load_model_config",
    "merge_stream", "pod_load_seconds", "record_expectation", "response_dict", "start_server", "stream_problems",
    "suite_catalog", "check_case_models",
]

if TYPE_CHECKING:
    from pytest_topsail.tgis.casefile import TgisCase, load_case_file
    from pytest_topsail.tgis.catalog import check_case_models, check_sized, suite_catalog
    from pytest_topsail.tgis.client import TgisClient
    from pytest_topsail.tgis.evaluation import compare, merge_stream, response_dict, stream_problems
    from pytest_topsail.tgis.latency import check_gpu_profile
    from pytest_topsail.tgis.load_time import pod_load_seconds
    from pytest_topsail.tgis.model_config import ENV_OF_FIELD, ModelConfig, load_model_config
    from pytest_topsail.tgis.recording import record_expectation
    from pytest_topsail.tgis.server import ServerSettings, ServerThread, start_server
    from pytest_topsail.tgis.settings import RunnerSettings, WorkerSettings

__getattr__, __dir__ = lazy_front(__name__, _EXPORTS)
