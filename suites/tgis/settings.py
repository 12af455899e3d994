"""The TGIS suite's settings, in tgis-tester's shape, validated when pytest starts (also on the xdist controller).

- ``tests.tgis``: ``[{model, configs: [ModelConfig], cases: [case file globs]}]``: one worker per (model, config);
  the case files are read and checked here, so a bad case file stops the run at once naming file, case and key.
- ``worker``: how workers are deployed and reached; ``runner``: how answers are judged (both in
  pytest_topsail/tgis/settings.py, which the fixture and the items read them by).
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pydantic

import pytest_topsail as topsail
from pytest_topsail.tgis import ModelConfig, RunnerSettings, TgisCase, check_sized, load_case_file
from pytest_topsail.tgis import WorkerSettings as BaseWorkerSettings


class TgisSpec(topsail.Settings):
    """One model, the configs to serve it with (the first is the reference) and the case files to run on each."""

    model: str = pydantic.Field(min_length=1)
    configs: list[ModelConfig] = pydantic.Field(min_length=1)
    cases: list[str] = pydantic.Field(min_length=1)
    strict_case_keys: bool = False  # refuse a case file with a key tgis-tester ignores (default: warn once per file)
    _cases: list[TgisCase] = pydantic.PrivateAttr(default_factory=list)

    model_config = pydantic.ConfigDict(extra="forbid", strict=False)  # ModelConfig reads YAML numbers and enums

    @pydantic.field_validator("model")
    @classmethod
    def _model_in_catalog(cls, model: str, info: pydantic.ValidationInfo) -> str:
        """A model the simulator serves is one it can size (pytest_topsail/tgis/catalog.py); a worker reached at a
        given url is served elsewhere."""
        suite = (info.context or {}).get("suite")
        if suite is not None and suite.config.get("worker.endpoint", None) != "url":
            check_sized(model, suite)
        return model

    @pydantic.model_validator(mode="after")
    def _unique_configs(self) -> TgisSpec:
        names = [config.name for config in self.configs]
        for index, name in enumerate(names):
            if name in names[:index]:
                raise ValueError(f"configs[{index}]: {name} is also configs[{names.index(name)}]; each config of a "
                                 "model must differ in its short name")
        return self

    def load_cases(self, rootdir: Path, warn: bool = True) -> list[TgisCase]:
        """The cases of the case files; ``warn``: about the keys tgis-tester ignores, once per file."""
        files = topsail.resolve_case_files(self.cases, rootdir, source="cases")
        loaded: list[TgisCase] = []
        for path in files:
            shown = str(path.relative_to(rootdir)) if path.is_relative_to(rootdir) else str(path)
            loaded += load_case_file(path, shown, strict=self.strict_case_keys, warn=warn)
        return loaded

    @property
    def tgis_cases(self) -> list[TgisCase]:
        return self._cases


class TgisTests(pydantic.RootModel[list[TgisSpec]]):
    @pydantic.model_validator(mode="after")
    def _read_case_files(self, info: pydantic.ValidationInfo) -> TgisTests:
        rootdir = Path((info.context or {}).get("rootdir") or Path.cwd())
        suite = (info.context or {}).get("suite")
        warn = suite is None or not suite.role.is_worker  # the xdist controller warns; its workers read them again
        models = [spec.model for spec in self.root]
        for index, spec in enumerate(self.root):
            if spec.model in models[:index]:
                raise ValueError(f"[{index}].model: {spec.model!r} is also [{models.index(spec.model)}].model")
            try:
                spec._cases = spec.load_cases(rootdir, warn)
            except topsail.TopsailError as error:
                raise ValueError(f"[{index}].cases: {error}") from None
        return self


class WorkerSettings(BaseWorkerSettings):
    """tgis-tester's ``worker`` section (pytest_topsail/tgis/settings.py), its ``env`` keys checked against
    the configs of tests.tgis."""

    @pydantic.field_validator("env")
    @classmethod
    def _env_names_a_config(cls, env: dict[str, dict[str, str]],
                            info: pydantic.ValidationInfo) -> dict[str, dict[str, str]]:
        """Each ``env`` key is the short name of a config of tests.tgis (else its variables would reach no worker)."""
        suite = (info.context or {}).get("suite")
        if suite is None or not env:
            return env
        names = sorted({config.name for spec in suite.settings("tests.tgis").root for config in spec.configs})
        for key in env:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=3, cutoff=0.5)
                hint = f"; closest: {', '.join(close)}" if close else ""
                raise ValueError(f"{key!r} names no config of tests.tgis (configs: {', '.join(names)}){hint}")
        return env


SETTINGS = {"tests.tgis": TgisTests, "worker": WorkerSettings, "runner": RunnerSettings}
