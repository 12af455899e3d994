"""The ``worker`` and ``runner`` sections of a TGIS suite (tgis-tester's): how the TGIS workers are deployed and
reached, and how their answers are judged.

Read by the TGIS workers fixture (fixtures/tgis_workers.py, through ``Suite.settings("worker", WorkerSettings)``), by
the suite's items (``Suite.settings("runner", RunnerSettings)``) and declared in the suite's settings.py.
"""

from __future__ import annotations

from typing import Literal

import pydantic

from pytest_topsail.settings import Settings
from pytest_topsail.tgis.evaluation import DEFAULT_ABS_TOLERANCE, DEFAULT_REL_TOLERANCE, Tolerance


class WorkerSettings(Settings):
    """tgis-tester's ``worker`` section, for KServe or plain pods."""

    image: str = "quay.io/opendatahub/text-generation-inference:stable"
    deploy_mode: Literal["inferenceservice", "pod"] = "inferenceservice"
    endpoint: Literal["port-forward", "direct", "url"] = "port-forward"
    url: str | None = None  # endpoint: url — an already served worker, host:port
    scheduled_timeout_s: float = pydantic.Field(900, gt=0)
    ready_timeout_s: float = pydantic.Field(1800, gt=0)
    max_parallel_workers: int = pydantic.Field(2, ge=1)
    keep: bool = False
    storage_uri_prefix: str = "s3://models/"
    # extra container environment per config short name, e.g. {"tgis_native|bf16": {TOPSAIL_TGIS_DIVERGE: "1"}}
    env: dict[str, dict[str, str]] = {}


class RunnerSettings(Settings):
    """tgis-tester's ``runner`` section."""

    generate_stream: bool = True
    evaluation_strategy: Literal["approx_equality", "exact_text_match"] = "approx_equality"
    # logprobs (token and top-token) are equal within abs_tolerance or rel_tolerance (tgis-tester's defaults)
    abs_tolerance: float = pydantic.Field(DEFAULT_ABS_TOLERANCE, ge=0)
    rel_tolerance: float = pydantic.Field(DEFAULT_REL_TOLERANCE, ge=0)
    request_timeout_s: float = pydantic.Field(60, gt=0)

    @property
    def tolerance(self) -> Tolerance:
        return Tolerance(abs=self.abs_tolerance, rel=self.rel_tolerance)
