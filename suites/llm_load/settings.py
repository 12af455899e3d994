"""The llm_load suite's settings (``tests.llm_load`` of config.yaml), validated when pytest starts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import pydantic

import pytest_topsail as topsail
from pytest_topsail.llmload import SERVER_KEY, case_load_settings, check_generator_image, check_server
from pytest_topsail.tgis import check_case_models, check_gpu_profile


class GivenEndpoint(topsail.Settings):
    """``serving: endpoint``: a model served elsewhere (e.g. a port-forward to a real predictor)."""

    http: str | None = None  # base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8080
    grpc: str | None = None  # host:port of the TGIS gRPC API
    model: str | None = None  # the name the server serves the model under (default: the case's model)


class GeneratorPoolSettings(topsail.Settings):
    """``tests.llm_load.generator_pool``: where the generator pods of a distributed load test run."""

    image: str = "topsail.local/llm-load-generator:latest"  # built from the repository's Containerfile
    node_selector: dict[str, str] = {}  # e.g. a driver machine pool's label
    tolerations: list[dict[str, Any]] = []
    start_delay_s: float = pydantic.Field(10.0, gt=0)  # the start barrier: every pod Running within this time
    late_s: float = pydantic.Field(1.0, gt=0)  # a pod starting later than this after the barrier sends nothing


class SloSettings(topsail.Settings):
    """``tests.llm_load.slo``: per-request targets; goodput and attainment KPIs when any is given."""

    ttft_ms: float | None = pydantic.Field(None, gt=0)  # time to first token
    itl_ms: float | None = pydantic.Field(None, gt=0)  # inter-token latency (the request's TPOT)
    e2e_ms: float | None = pydantic.Field(None, gt=0)  # end-to-end latency


class ApiKeySettings(topsail.Settings):
    """``tests.llm_load.api_key``: the OpenAI backend's key (Authorization: Bearer), never written anywhere; from
    an environment variable's name or a file (its first line)."""

    env: str | None = None
    file: str | None = None

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> ApiKeySettings:
        if self.env and self.file:
            raise ValueError("give env or file, not both")
        if self.file and not Path(self.file).expanduser().is_file():
            raise ValueError(f"file {self.file}: not found")
        return self

    def value(self) -> str | None:
        """The key, read now (an environment variable may be exported after start-up)."""
        if self.env:
            key = os.environ.get(self.env)
            if not key:
                raise topsail.TopsailError(f"tests.llm_load.api_key.env: the environment variable {self.env} is "
                                           "not set")
            return key
        if self.file:
            lines = Path(self.file).expanduser().read_text(encoding="utf-8").splitlines()
            return lines[0].strip() if lines else None
        return None


class LlmLoadSettings(topsail.Settings):
    serving: Literal["inferenceservice", "in-process", "endpoint"] = "inferenceservice"
    serving_timeout_s: float = pydantic.Field(300, gt=0)  # the InferenceService Ready
    endpoint: GivenEndpoint = GivenEndpoint()
    gpu_profile: str = "a100"  # in-process serving: the latency coefficients (pytest_topsail/tgis/latency.yaml)
    itl_factor: float = pydantic.Field(1.0, gt=0)  # multiplies the server's inter-token latency
    runtime_image: str = "quay.io/modh/vllm:rhoai-2.16"
    deployment_mode: str = "RawDeployment"
    timeout_s: float = pydantic.Field(120, gt=0)  # per request
    drain_timeout_s: float = pydantic.Field(30, ge=0)
    max_failure_rate: float = pydantic.Field(0.0, ge=0, le=1)
    max_errors: int | None = pydantic.Field(None, ge=1)  # stop rule: a point stops issuing after this many failures
    max_error_rate: float | None = pydantic.Field(None, ge=0, lt=1)  # ... or above this share of failures
    slo: SloSettings = SloSettings()
    grpc_ca_file: str | None = None  # backend tgis over TLS: the server's CA bundle (PEM), relative to the rootdir
    grpc_server_name: str | None = None  # ... the name its certificate holds, when not the endpoint's host
    client_max_cpu_share: float = pydantic.Field(0.9, gt=0)  # a warning when the load client used more CPU (cores)
    client_max_loop_lag_ms: float = pydantic.Field(50.0, gt=0)  # ... or its event loop woke up later (p99)
    generators: int = pydantic.Field(0, ge=0)  # > 0: the load runs as this many pods of a Job on the cluster
    generator_pool: GeneratorPoolSettings = GeneratorPoolSettings()
    api_key: ApiKeySettings = ApiKeySettings()  # the OpenAI backend's key: {env: NAME} or {file: PATH}
    # the serving pod's /metrics (vLLM's) scraped this often during each point -> server KPIs; null: not scraped
    server_metrics_interval_s: float | None = pydantic.Field(None, gt=0)

    @pydantic.field_validator("gpu_profile")
    @classmethod
    def _known_gpu_profile(cls, name: str) -> str:
        return check_gpu_profile(name)

    def point_defaults(self) -> dict[str, Any]:
        """What every case point takes from the suite's settings unless it sets it."""
        defaults: dict[str, Any] = {"timeout_s": self.timeout_s, "drain_timeout_s": self.drain_timeout_s,
                                    "client_max_cpu_share": self.client_max_cpu_share,
                                    "client_max_loop_lag_ms": self.client_max_loop_lag_ms}
        for rule in ("max_errors", "max_error_rate", "grpc_ca_file", "grpc_server_name"):
            if getattr(self, rule) is not None:
                defaults[rule] = getattr(self, rule)
        return defaults

    @pydantic.model_validator(mode="after")
    def _check_cases(self, info: pydantic.ValidationInfo) -> LlmLoadSettings:
        """Every case point of the suite checked at start-up (load mode and its keys, server keys), not at its item."""
        suite = (info.context or {}).get("suite")
        for case in suite.cases if suite is not None else []:
            try:
                where = f"{case.source or 'cases'}: case {case.id}"
                settings = case_load_settings(case.settings, where, self.point_defaults())
                rootdir = Path((info.context or {}).get("rootdir") or ".")
                if settings.grpc_ca_file and not (rootdir / settings.grpc_ca_file).is_file():
                    raise topsail.TopsailError(f"{where}: grpc_ca_file {rootdir / settings.grpc_ca_file}: not found")
                conversations = settings.multi_turn.file if settings.multi_turn else None
                if conversations and not (rootdir / conversations).is_file():
                    raise topsail.TopsailError(f"{where}: multi_turn.file {rootdir / conversations}: not found")
                if settings.mode == "sweep" and self.generators:
                    raise topsail.TopsailError(f"{where}: mode sweep runs in one process: it cannot run with "
                                               f"tests.llm_load.generators={self.generators}")
                check_server(case.settings.get(SERVER_KEY), f"{where}: {SERVER_KEY}", self.serving)
            except topsail.TopsailError as error:
                raise ValueError(str(error)) from None
        if suite is not None and self.generators and self.serving == "inferenceservice" and suite.cluster == "sim":
            try:
                check_generator_image(self.generator_pool.image, self.generators, own_runtime_images(suite))
            except topsail.TopsailError as error:
                raise ValueError(str(error)) from None
        if self.serving != "endpoint":  # a given endpoint serves a model nothing here sizes
            try:
                check_case_models(suite, in_process=self.serving == "in-process")
            except topsail.TopsailError as error:
                raise ValueError(str(error)) from None
        return self


def own_runtime_images(suite: Any) -> list[str]:
    """The image patterns of the suite's own ``cluster.sim.runtime`` entries (the simulator joins those of every
    suite in scope; the item checks the joined table again)."""
    cluster = suite.config.get("cluster", None)
    sim = cluster.get("sim") if isinstance(cluster, dict) else None
    runtime = sim.get("runtime") if isinstance(sim, dict) else None
    return [str(entry["image"]) for entry in runtime or [] if isinstance(entry, dict) and "image" in entry]


SETTINGS = {"tests.llm_load": LlmLoadSettings}
