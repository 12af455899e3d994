"""The model and dataset catalog (catalog.yaml beside this module), extendable by the suite configuration."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pytest_topsail.errors import TopsailError
from pytest_topsail.settings import validate


class ModelSpec(BaseModel):
    """The shape of a model: what the memory estimate and the simulator's performance model need."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params_b: float = Field(gt=0)  # parameters, in billions
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    max_length: int = Field(2048, gt=0)  # the model's maximum positions (model_max_length)
    quantized: bool = False  # a GPTQ checkpoint (weights in 4 bits)

    @property
    def params(self) -> float:
        return self.params_b * 1e9


class DatasetSpec(BaseModel):
    """A dataset: its sample count and the log-normal token-length distribution of a sample."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    samples: int = Field(gt=0)
    median_tokens: float = Field(gt=0)
    sigma: float = Field(0.5, ge=0)


@dataclass(frozen=True)
class Catalog:
    models: dict[str, ModelSpec]
    datasets: dict[str, DatasetSpec]

    def model(self, name: str, where: str = "model") -> ModelSpec:
        spec = self.models.get(_bare(name))
        if spec is None:
            known = ", ".join(sorted(self.models))
            raise TopsailError(f"{where}: model {name!r} is not in the catalog (known: {known});"
                               " add it under tests.fine_tuning.catalog.models with params_b, layers, hidden, heads")
        return spec

    def dataset(self, name: str, where: str = "dataset") -> DatasetSpec:
        spec = self.datasets.get(_dataset_key(name))
        if spec is None:
            raise TopsailError(f"{where}: dataset {name!r} is not in the catalog (known: "
                               f"{', '.join(sorted(self.datasets))}); add it under tests.fine_tuning.catalog.datasets")
        return spec

    def extended(self, extra: dict[str, Any] | None, source: str) -> Catalog:
        """This catalog with the models and datasets of `extra` ({models: {...}, datasets: {...}}) added or replaced."""
        if not extra:
            return self
        return Catalog({**self.models, **_parse(extra, "models", ModelSpec, source)},
                       {**self.datasets, **_parse(extra, "datasets", DatasetSpec, source)})


def _bare(name: str) -> str:
    """`bigscience/bloom-560m@hf` -> `bigscience/bloom-560m` (TOPSAIL's registry suffix)."""
    return name.split("@", 1)[0]


def _dataset_key(name: str) -> str:
    return name.removesuffix(".json").removesuffix(".jsonl")


def _parse(data: Any, section: str, model: type[BaseModel], source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TopsailError(f"{source}: the catalog must be a mapping with 'models' and 'datasets'")
    unknown = sorted(set(data) - {"models", "datasets"})
    if unknown:
        raise TopsailError(f"{source}: unknown catalog key(s) {', '.join(unknown)}; known: models, datasets")
    entries = data.get(section) or {}
    if not isinstance(entries, dict):
        raise TopsailError(f"{source}: {section} must be a mapping of name -> fields")
    parsed = {}
    for name, fields in entries.items():
        parsed[str(name)] = validate(model, fields, f"{source}: {section}.{name}")
    return parsed


@functools.cache
def builtin_catalog() -> Catalog:
    text = resources.files(__package__).joinpath("catalog.yaml").read_text(encoding="utf-8")
    return Catalog({}, {}).extended(yaml.safe_load(text), "pytest_topsail/fine_tuning/catalog.yaml")
