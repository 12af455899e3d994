"""Settings of the scale suite (``tests.scale`` in config.yaml), validated when pytest starts."""

from __future__ import annotations

from typing import Any, Literal

import pydantic

import pytest_topsail as topsail
from pytest_topsail.scale import RunOptions, Threshold, parse_lifecycles


class ScaleSettings(topsail.Settings):
    namespace_prefix: str = pydantic.Field("scale", pattern=r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")
    keep: bool = False
    progress: bool = True
    plots: bool = True
    include_plotlyjs: Literal["shared", "directory"] | bool = "shared"  # never a CDN: the artifacts work offline
    max_failed_jobs: int = pydantic.Field(0, ge=0)
    cleanup_timeout_s: float = pydantic.Field(60, gt=0)
    thresholds: list[dict[str, Any]] = []
    # resources whose lifecycle is sampled beside the jobs: built-in names (pytorchjob, workload, inferenceservice),
    # {builtin: <name>, ...overrides} or {name, api_version, kind, steps: [...]} (docs/scale.md "Lifecycles")
    lifecycle: list[Any] = []

    @pydantic.field_validator("lifecycle")
    @classmethod
    def lifecycles_parse(cls, value: list[Any]) -> list[Any]:
        try:
            parse_lifecycles(value, "lifecycle")
        except topsail.TopsailError as error:
            raise ValueError(str(error)) from None
        return value

    @pydantic.model_validator(mode="after")
    def thresholds_parse(self) -> ScaleSettings:
        lifecycles = parse_lifecycles(self.lifecycle, "lifecycle")  # checked first (a field validator)
        for index, raw in enumerate(self.thresholds):
            try:
                Threshold.parse(raw, f"thresholds[{index}]", lifecycles)
            except topsail.TopsailError as error:
                raise ValueError(str(error)) from None
        return self

    def run_options(self) -> RunOptions:
        lifecycles = tuple(parse_lifecycles(self.lifecycle, "tests.scale.lifecycle"))
        return RunOptions(
            namespace_prefix=self.namespace_prefix,
            thresholds=tuple(Threshold.parse(raw, "tests.scale.thresholds", lifecycles) for raw in self.thresholds),
            keep=self.keep,
            plots=self.plots,
            include_plotlyjs=self.include_plotlyjs,
            cleanup_timeout_s=self.cleanup_timeout_s,
            lifecycles=lifecycles,
        )


SETTINGS = {"tests.scale": ScaleSettings}
