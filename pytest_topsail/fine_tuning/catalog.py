"""The model and dataset catalog (catalog.yaml beside this module), extendable by the suite configuration."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_topsail.errors import TopsailError
from pytest_topsail.settings import validate
from pytest_topsail.yamlparse import parse_yaml


class ModelSpec(BaseModel):
    """The shape of a model: what the memory estimate and the simulator's performance model need."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    params_b: float = Field(gt=0)  # parameters, in billions
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    max_length: int = Field(2048, gt=0)  # the model's maximum positions (model_max_length)
    quantized: bool = False  # a GPTQ checkpoint (weights in 4 bits)
    family: str | None = None  # architecture family (a key of `families`): its LoRA target modules
    tiny: bool = False  # a random model built locally from this shape (pytest_topsail.fine_tuning.tiny)

    @property
    def params(self) -> float:
        return self.params_b * 1e9


class DatasetSpec(BaseModel):
    """A dataset: its sample count and the log-normal token-length distribution of a sample."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    samples: int = Field(gt=0)
    median_tokens: float = Field(gt=0)
    sigma: float = Field(0.5, ge=0)
    format: str | None = None  # sample format (a key of `formats`): the template the trainer's text is built with
    generated: bool = False  # generated locally (pytest_topsail.fine_tuning.tiny), alpaca-shaped


class FamilySpec(BaseModel):
    """An architecture family: the names of its attention projections, which LoRA targets by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lora_target_modules: list[str] = Field(min_length=1)
    modules: list[str] = Field(default_factory=list)  # every linear module name; empty: not checked

    def missing(self, targets: list[str]) -> list[str]:
        """The targets that name no module of this family (`all-linear` always matches)."""
        if not self.modules or "all-linear" in targets:
            return []
        return [t for t in targets if t not in self.modules]


class FormatSpec(BaseModel):
    """How a sample of a dataset format becomes the trainer's text: fms-hf-tuning's `data_formatter_template`
    (`{{field}}` placeholders) and the `response_template` marking where the answer starts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: str = Field(min_length=1)
    response_template: str = Field(min_length=1)

    def render(self, sample: dict[str, Any]) -> str:
        return render_template(self.template, sample)


def render_template(template: str, sample: dict[str, Any]) -> str:
    """`{{field}}` -> the sample's value (empty when absent), as fms-hf-tuning's formatter does."""
    return _PLACEHOLDER.sub(lambda m: str(sample.get(m.group(1)) or ""), template)


_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


@dataclass(frozen=True)
class Catalog:
    models: dict[str, ModelSpec]
    datasets: dict[str, DatasetSpec]
    families: dict[str, FamilySpec] = dataclasses.field(default_factory=dict)
    formats: dict[str, FormatSpec] = dataclasses.field(default_factory=dict)
    # the catalogs `extended` built from this one, by their entries: each is validated and built once per process
    _extensions: dict[str, Catalog] = dataclasses.field(default_factory=dict, init=False, compare=False, repr=False)

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

    def lora_target_modules(self, name: str, where: str = "model") -> list[str]:
        """The default LoRA target modules of a model: those of its family. Without a known family, one error
        naming the catalog key and the point's key to set instead."""
        spec = self.model(name, where)
        family = self.families.get(spec.family or "")
        if family is None:
            known = ", ".join(sorted(self.families))
            reason = "has no family" if spec.family is None else f"has family {spec.family!r}, not in families"
            raise TopsailError(f"{where}: lora.target_modules is not given and model {_bare(name)!r} {reason} "
                               f"(key models.{_bare(name)}.family of {CATALOG_FILE} or tests.fine_tuning.catalog; "
                               f"known families: {known}); set lora.target_modules in the case or the model's "
                               "family in the catalog")
        return list(family.lora_target_modules)

    def dataset_format(self, name: str, where: str = "dataset") -> FormatSpec | None:
        spec = self.dataset(name, where)
        if spec.format is None:
            return None
        found = self.formats.get(spec.format)
        if found is None:
            raise TopsailError(f"{where}: dataset {name!r} has format {spec.format!r}, which is not in formats "
                               f"(key datasets.{_dataset_key(name)}.format; known: "
                               f"{', '.join(sorted(self.formats))})")
        return found

    def extended(self, extra: dict[str, Any] | None, source: str) -> Catalog:
        """This catalog with the entries of `extra` ({models: {...}, datasets: {...}, families: {...},
        formats: {...}}) added or replaced; `source` names them in errors. The same entries give the same catalog,
        built once (the suite's settings, its points' checks and its fixtures all ask for it)."""
        if not extra:
            return self
        key = json.dumps(extra, sort_keys=True, default=repr)
        if key not in self._extensions:
            self._extensions[key] = Catalog({**self.models, **_parse(extra, "models", ModelSpec, source)},
                                            {**self.datasets, **_parse(extra, "datasets", DatasetSpec, source)},
                                            {**self.families, **_parse(extra, "families", FamilySpec, source)},
                                            {**self.formats, **_parse(extra, "formats", FormatSpec, source)})
        return self._extensions[key]


CATALOG_FILE = "pytest_topsail/fine_tuning/catalog.yaml"
SECTIONS = ("models", "datasets", "families", "formats")


def _bare(name: str) -> str:
    """`bigscience/bloom-560m@hf` -> `bigscience/bloom-560m` (TOPSAIL's registry suffix)."""
    return name.split("@", 1)[0]


def _dataset_key(name: str) -> str:
    return name.removesuffix(".json").removesuffix(".jsonl")


def _parse(data: Any, section: str, model: type[BaseModel], source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TopsailError(f"{source}: the catalog must be a mapping with 'models' and 'datasets'")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise TopsailError(f"{source}: unknown catalog key(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
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
    return Catalog({}, {}).extended(parse_yaml(text), CATALOG_FILE)
