"""The ``worker`` section of a TGIS suite (tgis-tester's): how the TGIS workers are deployed and reached.

Read by the TGIS workers fixture (fixtures/tgis_workers.py, through ``Suite.settings("worker", WorkerSettings)``) and
by the suite (the image and deploy mode are labels of its cases).
"""

from __future__ import annotations

from typing import Literal

import pydantic

from pytest_topsail.settings import Settings


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
