"""The model catalog of the simulated model servers: what a served model weighs (catalog.yaml beside this module),
extended by a suite's ``cluster.sim.plugins.kserve.models``.

The simulator sizes a model from here (pytest_topsail.tgis.sizing: memory fit, download and load time, decode speed)
and the suites check their models against it at start-up, so a misspelled name stops the run naming the closest
known names instead of being served and failing late. A real cluster serves models the catalog cannot all know:
there a model is checked only where the simulator sizes it (docs/tgis.md, "Model catalog").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pytest_topsail.config import closest_keys
from pytest_topsail.errors import TopsailError
from pytest_topsail.settings import validate

CATALOG_FILE = "pytest_topsail/tgis/catalog.yaml"
EXTRA_KEY = "cluster.sim.plugins.kserve.models"  # where a suite declares the models the catalog does not list


class ServedModel(BaseModel):
    """One model's weights: what sizing needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params_billions: float = Field(gt=0)
    active_params_billions: float | None = Field(None, gt=0)  # a mixture of experts': what computes one token
    dtype: Literal["float16", "bfloat16", "float32"] = "float16"  # the checkpoint's weights as stored
    quantization: Literal["gptq"] | None = None  # a 4-bit GPTQ checkpoint

    @property
    def active_billions(self) -> float:
        return self.active_params_billions or self.params_billions


@dataclass(frozen=True)
class Catalog:
    models: Mapping[str, ServedModel]

    def find(self, name: str) -> ServedModel | None:
        """The model named `name` (its full name or its last part, any case), else None."""
        index = self._index
        bare = name.split("@", 1)[0].rstrip("/")
        return index.get(bare.lower()) or index.get(bare.rsplit("/", 1)[-1].lower())

    def require(self, name: str, where: str) -> ServedModel:
        """The model, or one TopsailError naming `where`, the closest known names and how to declare it."""
        found = self.find(name)
        if found is None:
            raise TopsailError(f"{where}: {self.unknown(name)}")
        return found

    def unknown(self, name: str) -> str:
        """Why `name` cannot be sized: the closest known names and where to declare it."""
        close = self.closest(name)
        hint = f"; closest known: {', '.join(close)}" if close else ""
        return (f"model {name!r} is not in the model catalog ({CATALOG_FILE}){hint}; to serve a model it does not "
                f"list, declare it under {EXTRA_KEY} (e.g. {{{name}: {{params_billions: 7}}}})")

    def closest(self, name: str, count: int = 3) -> list[str]:
        lowered = {key.lower(): key for key in self.models}
        short = {key.rsplit("/", 1)[-1].lower(): key for key in self.models}
        typed = name.split("@", 1)[0].lower()
        matches = closest_keys(dict.fromkeys(lowered), typed, count) + closest_keys(
            dict.fromkeys(short), typed.rsplit("/", 1)[-1], count)
        names = [lowered.get(match) or short[match] for match in matches]
        return list(dict.fromkeys(names))[:count]

    def extended(self, extra: Mapping[str, ServedModel] | None) -> Catalog:
        return Catalog({**self.models, **extra}) if extra else self

    @functools.cached_property
    def _index(self) -> dict[str, ServedModel]:
        index: dict[str, ServedModel] = {}
        for key, spec in self.models.items():  # the last part first: a full name wins over another's last part
            index.setdefault(key.rsplit("/", 1)[-1].lower(), spec)
        for key, spec in self.models.items():
            index[key.lower()] = spec
        return index


def parse_models(data: Any, where: str) -> dict[str, ServedModel]:
    """``{name: {params_billions, ...}}`` validated, each entry's errors naming `where` and its key."""
    if not isinstance(data, dict):
        raise TopsailError(f"{where}: expected a mapping of model name -> {{params_billions: ...}}")
    return {str(name): validate(ServedModel, fields, f"{where}.{name}") for name, fields in data.items()}


@functools.cache
def builtin_catalog() -> Catalog:
    text = resources.files(__package__).joinpath("catalog.yaml").read_text(encoding="utf-8")
    return Catalog(parse_models(yaml.safe_load(text)["models"], f"{CATALOG_FILE}: models"))


def catalog(extra: Mapping[str, ServedModel] | None = None) -> Catalog:
    """The built-in catalog with a suite's declared models added (they win over a built-in entry of that name)."""
    return builtin_catalog().extended(extra)


def suite_catalog(suite: Any) -> Catalog:
    """The catalog with the models a suite declares (``cluster.sim.plugins.kserve.models`` of its configuration)."""
    extra = suite.config.get(EXTRA_KEY, None) if suite is not None else None
    return catalog(parse_models(extra, f"{suite.config.source}: {EXTRA_KEY}") if extra else None)


def check_sized(model: str, suite: Any, *, in_process: bool = False) -> ServedModel | None:
    """At start-up, a model the simulator will size: its entry, from the catalog or the suite's declared models;
    a ValueError naming the closest known names when it is in neither. On a real cluster (``suite.cluster`` kube)
    nothing sizes a model unless it is served in-process (`in_process`): None, unchecked."""
    known = sizing_catalog(suite, in_process)
    if known is None:
        return None
    found = known.find(model)
    if found is None:
        raise ValueError(known.unknown(model))
    return found


def check_case_models(suite: Any, key: str = "model", *, in_process: bool = False) -> None:
    """At start-up, every case of `suite` names under `key` a model the simulator can size (in the catalog or declared
    by the suite under ``cluster.sim.plugins.kserve.models``); else one TopsailError naming the case file, the case,
    the closest known names and how to declare the model. Call it from a model validator of the suite's settings.py
    (its validation context holds the suite: ``info.context["suite"]``), which the engine runs when pytest starts,
    also on the xdist controller. Unchecked as ``check_sized``: no suite, or a real cluster (unless `in_process`)."""
    known = sizing_catalog(suite, in_process)
    if known is None:
        return
    for case in suite.cases:
        where = f"{case.source or 'cases'}: case {case.id}"
        model = case.settings.get(key)
        if not isinstance(model, str) or not model:
            raise TopsailError(f"{where}: {key}: expected the name of a model the simulator serves, got {model!r}")
        if known.find(model) is None:
            raise TopsailError(f"{where}: {known.unknown(model)}")


def sizing_catalog(suite: Any, in_process: bool) -> Catalog | None:
    """The catalog that sizes `suite`'s models, or None when nothing will (no suite; a real cluster, unless the suite
    serves its models in-process)."""
    if suite is None or (getattr(suite, "cluster", "sim") != "sim" and not in_process):
        return None
    return suite_catalog(suite)
