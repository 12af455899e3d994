"""A load test's settings as a suite case gives them (validated; one error naming the case and every bad key)."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends import Backend
from pytest_topsail.llmload.dataset import (
    BUNDLED,
    FILTERS,
    Lengths,
    Prompt,
    filter_prompts,
    load_dataset,
    synthetic_prompts,
)
from pytest_topsail.llmload.generator import AutoSweep, LoadPoint
from pytest_topsail.llmload.multi_turn import sharegpt_conversations, synthetic_conversations
from pytest_topsail.llmload.shared_prefix import assign_models, shared_prefix_prompts
from pytest_topsail.settings import Settings, validate


class TokenLengths(Settings):
    """A token length distribution: normal of ``mean`` and ``stdev`` (0: always ``mean``), clipped to [min, max]."""

    model_config = pydantic.ConfigDict(frozen=True)  # and strict, unknown keys refused (topsail.Settings)

    mean: int = pydantic.Field(ge=1)
    stdev: float = pydantic.Field(default=0.0, ge=0)
    min: int = pydantic.Field(default=1, ge=1)
    max: int | None = pydantic.Field(default=None, ge=1)

    @pydantic.model_validator(mode="after")
    def _ordered(self) -> TokenLengths:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) < min ({self.min})")
        return self


class SyntheticSettings(Settings):
    """``dataset: synthetic``: prompts generated at start-up (seeded by the case's ``seed``)."""

    model_config = pydantic.ConfigDict(frozen=True)  # and strict, unknown keys refused (topsail.Settings)

    prompts: int = pydantic.Field(default=64, ge=1)
    input_tokens: Annotated[int, pydantic.Field(ge=1)] | TokenLengths  # a length, or {mean, stdev, min, max}
    output_tokens: Annotated[int, pydantic.Field(ge=1)] | TokenLengths
    tokenizer: str | None = None  # a tokenizer.json (tokenizers library), relative to the rootdir; else our toy one

    def generate(self, seed: int, rootdir: Path) -> list[Prompt]:
        def lengths(value: int | TokenLengths) -> Lengths:
            return Lengths(value) if isinstance(value, int) else Lengths(value.mean, value.stdev, value.min,
                                                                          value.max)

        tokenizer = Path(rootdir) / self.tokenizer if self.tokenizer else None
        return synthetic_prompts(self.prompts, lengths(self.input_tokens), lengths(self.output_tokens), seed,
                                 tokenizer)


class SharedPrefixSettings(Settings):
    """``dataset: shared-prefix``: ``prefixes`` x ``prompts_per_prefix`` prompts, each a shared prefix of
    ``prefix_tokens`` then its own suffix of ``suffix_tokens`` (shared_prefix.py; seeded by the case's ``seed``)."""

    model_config = pydantic.ConfigDict(frozen=True)  # and strict, unknown keys refused (topsail.Settings)

    prefixes: int = pydantic.Field(default=1, ge=1)
    prompts_per_prefix: int = pydantic.Field(default=64, ge=1)
    prefix_tokens: int = pydantic.Field(ge=0)
    suffix_tokens: int = pydantic.Field(ge=1)
    output_tokens: int = pydantic.Field(ge=1)

    def generate(self, seed: int) -> list[Prompt]:
        return shared_prefix_prompts(self.prefixes, self.prompts_per_prefix, self.prefix_tokens, self.suffix_tokens,
                                     self.output_tokens, seed)


class MultiTurnSettings(Settings):
    """``dataset: multi-turn``: conversations whose turns carry the earlier turns (multi_turn.py), from a local
    ShareGPT-format JSON ``file`` (relative to the rootdir; ``conversations``: at most that many, ``turns``: each cut
    to that many) or synthetic (``conversations`` x ``turns`` turns of ``input_tokens`` per user message and
    ``output_tokens`` per answer); ``think_time_s`` between an answer and the next turn of its user."""

    model_config = pydantic.ConfigDict(frozen=True)  # and strict, unknown keys refused (topsail.Settings)

    file: str | None = None
    conversations: int | None = pydantic.Field(default=None, ge=1)
    turns: int | None = pydantic.Field(default=None, ge=1)
    input_tokens: int | None = pydantic.Field(default=None, ge=1)
    output_tokens: int | None = pydantic.Field(default=None, ge=1)
    think_time_s: float = pydantic.Field(default=0.0, ge=0)

    @pydantic.model_validator(mode="after")
    def _one_source(self) -> MultiTurnSettings:
        synthetic = {"conversations": self.conversations, "turns": self.turns, "input_tokens": self.input_tokens,
                     "output_tokens": self.output_tokens}
        if self.file is None and None in synthetic.values():
            missing = [name for name, value in synthetic.items() if value is None]
            raise ValueError(f"give a ShareGPT file, or the synthetic conversations' {', '.join(missing)}")
        if self.file is not None and (self.input_tokens or self.output_tokens):
            raise ValueError("a file's turns have their own lengths: input_tokens and output_tokens go without file")
        return self

    def generate(self, seed: int, rootdir: Path) -> list[Prompt]:
        if self.file is not None:
            return sharegpt_conversations(Path(rootdir) / self.file, self.turns, self.conversations)
        assert self.conversations and self.turns and self.input_tokens and self.output_tokens  # _one_source
        return synthetic_conversations(self.conversations, self.turns, self.input_tokens, self.output_tokens, seed)


GENERATED = {"synthetic": "synthetic: {prompts, input_tokens, output_tokens}",
             "multi-turn": "multi_turn: {file | conversations, turns, input_tokens, output_tokens; think_time_s}",
             "shared-prefix": "shared_prefix: {prefixes, prompts_per_prefix, prefix_tokens, suffix_tokens, "
                              "output_tokens}"}


class LoadSettings(Settings):
    """What one load point sends, how, and for how long (docs/llm-load.md, "Load modes" and "Backends")."""

    model_config = pydantic.ConfigDict(frozen=True)  # and strict, unknown keys refused (topsail.Settings)

    model: str
    backend: Literal["openai", "tgis"] = "openai"
    api: Literal["completions", "chat"] = "completions"  # openai backend only
    streaming: bool = True
    mode: Literal["concurrency", "constant", "poisson", "throughput", "sweep"] = "concurrency"
    concurrency: int | None = pydantic.Field(default=None, ge=1)
    rate: float | None = pydantic.Field(default=None, gt=0)
    duration_s: float | None = pydantic.Field(default=None, gt=0)
    requests: int | None = pydantic.Field(default=None, ge=1)
    warmup_s: float = pydantic.Field(default=0.0, ge=0)  # ramp-up: requests issued this long are warm-up
    warmup_requests: int = pydantic.Field(default=0, ge=0)  # ... and the first this many
    cooldown_s: float = pydantic.Field(default=0.0, ge=0)  # cool-down: issuing goes on this long after measuring
    cooldown_requests: int = pydantic.Field(default=0, ge=0)  # ... and for this many requests
    timeout_s: float = pydantic.Field(default=300.0, gt=0)
    drain_timeout_s: float = pydantic.Field(default=60.0, ge=0)
    seed: int = 0
    dataset: str = "bundled"  # "bundled", "synthetic", "shared-prefix", "multi-turn" or a JSON-lines file (ours or
    # llm-load-test's), relative to the rootdir
    synthetic: SyntheticSettings | None = None  # dataset: synthetic
    shared_prefix: SharedPrefixSettings | None = None  # dataset: shared-prefix
    multi_turn: MultiTurnSettings | None = None  # dataset: multi-turn
    models: dict[str, Annotated[float, pydantic.Field(gt=0)]] | None = None  # each request's model (LoRA adapter)
    # drawn by these weights; None: every request names ``model``
    max_prompts: int | None = pydantic.Field(default=None, ge=1)
    grpc_ca_file: str | None = None  # backend tgis over TLS: the CA bundle (PEM), relative to the rootdir
    grpc_server_name: str | None = None  # ... the name the server's certificate holds, when not the target's host
    min_input_tokens: int | None = pydantic.Field(default=None, ge=0)  # llm-load-test's dataset filters
    max_input_tokens: int | None = pydantic.Field(default=None, ge=1)
    min_output_tokens: int | None = pydantic.Field(default=None, ge=0)
    max_output_tokens: int | None = pydantic.Field(default=None, ge=1)
    max_sequence_tokens: int | None = pydantic.Field(default=None, ge=1)
    max_errors: int | None = pydantic.Field(default=None, ge=1)  # stop rule: stop issuing after this many failures
    max_error_rate: float | None = pydantic.Field(default=None, ge=0, lt=1)  # ... above this share failed
    error_rate_min_requests: int = pydantic.Field(default=20, ge=1)  # ... counted from this many ended requests
    client_max_cpu_share: float = pydantic.Field(default=0.9, gt=0)  # client saturation warning: CPU of a core
    client_max_loop_lag_ms: float = pydantic.Field(default=50.0, gt=0)  # ... or the event loop's p99 lag
    sweep_rates: int = pydantic.Field(default=4, ge=0)  # mode sweep: constant rates between synchronous and max
    max_concurrency: int = pydantic.Field(default=256, ge=1)  # modes throughput, sweep: the max-throughput users

    @pydantic.model_validator(mode="after")
    def _generated_with_its_dataset(self) -> LoadSettings:
        for dataset, its_settings in GENERATED.items():
            key = its_settings.split(":", 1)[0]
            if (self.dataset == dataset) != (getattr(self, key) is not None):
                raise ValueError(f"dataset: {dataset} and the {its_settings} settings go together")
        if self.multi_turn is not None:
            cutting = [name for name in (*FILTERS, "max_prompts", "models") if getattr(self, name) is not None]
            if cutting:
                raise ValueError(f"dataset: multi-turn keeps whole conversations: {', '.join(cutting)} would cut "
                                 "them (multi_turn.conversations and .turns limit them)")
            if self.mode not in ("concurrency", "throughput"):
                raise ValueError(f"dataset: multi-turn runs in a closed loop (mode concurrency or throughput: each "
                                 f"user holds one conversation at a time), not mode {self.mode}")
        return self

    @classmethod
    def parse(cls, values: dict[str, Any], where: str) -> LoadSettings:
        """The validated settings; a TopsailError naming ``where`` and every wrong key otherwise."""
        return validate(cls, values, where, "invalid load settings")

    def load_point(self) -> LoadPoint:
        """The point (mode sweep: its first point, one user; ``plan()`` gives the whole sweep; mode throughput:
        ``max_concurrency`` users, guidellm's throughput profile)."""
        mode, concurrency = {"sweep": ("concurrency", 1), "throughput": ("concurrency", self.max_concurrency)}.get(
            self.mode, (self.mode, self.concurrency))
        return LoadPoint(mode=mode, concurrency=concurrency, rate=self.rate, duration_s=self.duration_s,
                         requests=self.requests, warmup_s=self.warmup_s, warmup_requests=self.warmup_requests,
                         cooldown_s=self.cooldown_s, cooldown_requests=self.cooldown_requests, timeout_s=self.timeout_s,
                         drain_timeout_s=self.drain_timeout_s, seed=self.seed,
                         max_errors=self.max_errors, max_error_rate=self.max_error_rate,
                         error_rate_min_requests=self.error_rate_min_requests,
                         client_max_cpu_share=self.client_max_cpu_share,
                         client_max_loop_lag_ms=self.client_max_loop_lag_ms,
                         think_time_s=self.multi_turn.think_time_s if self.multi_turn else 0.0)

    def plan(self) -> list[LoadPoint] | AutoSweep:
        """What ``run_load_test`` runs: the one point, or mode sweep's points, each chosen from those before."""
        if self.mode != "sweep":
            return [self.load_point()]
        return AutoSweep(self.load_point(), rates=self.sweep_rates, max_concurrency=self.max_concurrency)

    def prompts(self, rootdir: Path) -> list[Prompt]:
        """The dataset's prompts (or the synthetic ones), filtered by length, then at most ``max_prompts``."""
        if self.synthetic is not None:
            prompts, where = self.synthetic.generate(self.seed, rootdir), "synthetic dataset"
        elif self.shared_prefix is not None:
            prompts, where = self.shared_prefix.generate(self.seed), "shared-prefix dataset"
        elif self.multi_turn is not None:
            return self.multi_turn.generate(self.seed, rootdir)  # whole conversations: no filter cuts them
        else:
            path = BUNDLED if self.dataset == "bundled" else Path(rootdir) / self.dataset
            prompts, where = load_dataset(path), f"dataset {path}"
        limits = {name: getattr(self, name) for name in FILTERS}
        prompts = filter_prompts(prompts, where, **limits)[:self.max_prompts]
        return assign_models(prompts, self.models, self.seed) if self.models else prompts

    def make_backend(self, *, http_url: str | None = None, grpc_target: str | None = None,
                     served_model: str | None = None, api_key: str | None = None,
                     rootdir: Path = Path(".")) -> Backend:
        """The backend for this case on the given endpoint (TopsailError when the endpoint is missing);
        ``served_model`` is the name the server knows the model by, when it differs from the case's."""
        model = served_model or self.model
        if self.backend == "tgis":
            if not grpc_target:
                raise TopsailError(f"backend tgis for model {self.model}: the server offers no gRPC endpoint")
            from pytest_topsail.llmload.backends.tgis_grpc import TgisBackend

            ca_file = str(Path(rootdir) / self.grpc_ca_file) if self.grpc_ca_file else None
            if ca_file and not Path(ca_file).is_file():
                raise TopsailError(f"grpc_ca_file {ca_file}: not found (the CA bundle of the gRPC server's TLS)")
            return TgisBackend(grpc_target, model=model, stream=self.streaming, ca_file=ca_file,
                               server_name=self.grpc_server_name)
        if not http_url:
            raise TopsailError(f"backend openai for model {self.model}: the server offers no HTTP endpoint")
        from pytest_topsail.llmload.backends.openai_http import OpenAIBackend

        return OpenAIBackend(http_url, model, api=self.api, stream=self.streaming, api_key=api_key)


SERVER_KEY = "server"  # case key: the reference server's ModelConfig (tgis-tester's keys)


def case_load_settings(case_settings: dict[str, Any], where: str, defaults: dict[str, Any]) -> LoadSettings:
    """The load settings of one case point (its ``server`` key apart), the suite's ``defaults`` for the keys it does
    not set, the load mode's required keys checked (constant/poisson need a rate); a TopsailError naming ``where``
    otherwise."""
    values = {key: value for key, value in case_settings.items() if key != SERVER_KEY}
    for key, value in defaults.items():
        values.setdefault(key, value)
    settings = LoadSettings.parse(values, where)
    chosen = {"sweep": "chooses its concurrency and rates itself (synchronous, max_concurrency users, sweep_rates "
                       "rates between)",
              "throughput": f"sends as many requests at once as max_concurrency ({settings.max_concurrency}) allows"}
    if settings.mode in chosen and (settings.concurrency is not None or settings.rate is not None):
        raise TopsailError(f"{where}: mode {settings.mode} {chosen[settings.mode]}: remove concurrency/rate")
    settings.load_point().check(where)
    return settings


def check_server(server: Any, where: str, serving: str) -> None:
    """A case's ``server`` settings: the reference server's ModelConfig keys, and for ``serving: inferenceservice``
    only those an InferenceService passes to its container; a TopsailError naming ``where`` and the keys otherwise."""
    from pytest_topsail.tgis.model_config import ENV_OF_FIELD, load_model_config

    if server is None:
        return
    if not isinstance(server, dict):
        raise TopsailError(f"{where}: must be a mapping of the reference server's settings")
    load_model_config(server, where)
    unknown = sorted(set(server) - set(ENV_OF_FIELD))
    if unknown and serving == "inferenceservice":
        raise TopsailError(f"{where}: {', '.join(unknown)} cannot be given to an InferenceService "
                           f"(known: {', '.join(ENV_OF_FIELD)})")


def check_generator_image(image: str, count: int, patterns: list[str]) -> None:
    """On the simulator the generator pods run only as real workloads: a ``cluster.sim.runtime`` entry must match
    their image (the suite's config.yaml has one for the default image); a TopsailError saying what to set."""
    if any(fnmatch.fnmatchcase(image, pattern) for pattern in patterns):
        return
    runnable = [pattern for pattern in patterns if "llm-load-generator" in pattern]
    raise TopsailError(
        f"tests.llm_load.generators={count} on the simulator: no cluster.sim.runtime entry runs the generator "
        f"image {image!r} (tests.llm_load.generator_pool.image); "
        + (f"set tests.llm_load.generator_pool.image to match {runnable[0]!r}, or " if runnable else "")
        + f"add to cluster.sim.runtime an entry {{image: {image!r}, env: {{PYTHONPATH: '{{source}}'}}, "
        "max_seconds: 900}")
