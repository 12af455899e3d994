"""One point of the fine-tuning matrix (a case after matrix expansion): the trainer's hyper-parameters and the job's
shape, validated with pydantic (`PointSettings`, `validate_point`), and the point file an item writes beside its
artifacts so that ``--topsail-replot`` reads the same point again (`save_point`, `load_point`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, field_validator

from pytest_topsail.fine_tuning.catalog import Catalog
from pytest_topsail.settings import Settings, validate
from pytest_topsail.yamlparse import parse_yaml

POINT_FILE = "point.yaml"  # the point's settings in its item's artifact directory
DEFAULT_IMAGE = "quay.io/modh/fms-hf-tuning:v2.8.2"


class FrozenSettings(Settings):
    """Strict (``topsail.Settings``) and immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LoraSettings(FrozenSettings):
    r: int = Field(4, ge=1)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | None = None  # None: the model family's (catalog `families`), resolved at start-up

    @field_validator("target_modules", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """A list in a case file is a matrix dimension unless raw: 'q_proj,k_proj' is accepted too."""
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


class DatasetSettings(FrozenSettings):
    name: str = "alpaca"
    replication: float = Field(1.0, gt=0)  # x copies of the dataset; the fractional part is a seeded subset


class PointSettings(FrozenSettings):
    """One fine-tuning run: the trainer's hyper-parameters and the job's shape."""

    model: str = "bigscience/bloom-560m"
    model_params_b: float | None = Field(None, gt=0)  # overrides the catalog's parameter count
    method: Literal["full", "lora", "qlora"] = "full"
    lora: LoraSettings = Field(default_factory=LoraSettings)
    gpus_per_pod: int = Field(1, ge=1, le=64)
    pods: int = Field(1, ge=1, le=1024)
    per_device_batch_size: int = Field(4, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_seq_length: int = Field(1024, ge=8)
    epochs: float = Field(1.0, gt=0)
    learning_rate: float = Field(1e-5, gt=0)
    logging_steps: int | None = Field(None, ge=1)  # None: about 20 loss lines over the run
    dataset: DatasetSettings = Field(default_factory=DatasetSettings)
    flash_attention: bool = False
    gradient_checkpointing: bool = False
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    container_image: str = DEFAULT_IMAGE
    shared_memory_gb: float | None = Field(None, gt=0)  # /dev/shm size (memory emptyDir); None: no /dev/shm volume

    def resolved(self, catalog: Catalog, where: str) -> PointSettings:
        """This point with what the catalog decides: LoRA target modules from the model's family when not given
        (an unknown family is one TopsailError naming the catalog key)."""
        if self.method == "full" or self.lora.target_modules is not None:
            return self
        modules = catalog.lora_target_modules(self.model, where)
        return self.model_copy(update={"lora": self.lora.model_copy(update={"target_modules": modules})})

    @property
    def world_size(self) -> int:
        """GPUs of the whole job: pods x GPUs per pod."""
        return self.pods * self.gpus_per_pod

    @property
    def effective_batch_size(self) -> int:
        """Samples per optimizer step: per-device batch x gradient accumulation x GPUs."""
        return self.per_device_batch_size * self.gradient_accumulation_steps * self.world_size


def validate_point(settings: dict[str, Any], where: str) -> PointSettings:
    return validate(PointSettings, settings, where, "invalid point settings")


def save_point(point: PointSettings, directory: Path) -> Path:
    """The point's settings as ``point.yaml`` in the item's artifact directory (read back by :func:`load_point`)."""
    path = directory / POINT_FILE
    path.write_text(yaml.safe_dump(point.model_dump(mode="json"), sort_keys=False))
    return path


def load_point(directory: Path) -> PointSettings:
    """The point an item ran, from its artifact directory (``--topsail-replot``)."""
    path = Path(directory) / POINT_FILE
    return validate_point(parse_yaml(path.read_text(encoding="utf-8")) or {}, str(path))
