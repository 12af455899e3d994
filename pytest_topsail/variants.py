"""Variants as data: a suite's items built from more than one source, declared in config.yaml.

```yaml
variants:
  - name: granite                     # id prefix: granite-f16-<case id>
    cases: [cases/tgis/granite.yaml]  # case globs of this variant (default: the suite's `cases:`)
    settings: {model: granite}        # deep-merged under every case's own settings
    alternatives:                     # optional: one variant per alternative, its settings merged on top
      f16: {model_config: {dtype: float16}}
      f32: {model_config: {dtype: float32}}
    xdist_group: true                 # true (default): one xdist group per variant; a name; false: none
```

Everything is checked when the suite is loaded (configure time, also on the xdist controller): a bad variant is one
message naming the config.yaml key (`variants[1].cases`, `variants[0]: key foo`), never a collection traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pydantic

from pytest_topsail.cases import Case, check_unique_ids, load_cases, with_variant
from pytest_topsail.errors import TopsailError
from pytest_topsail.settings import validate
from pytest_topsail.tree import deep_merge

VARIANTS_KEY = "variants"
NAME_PATTERN = r"^[A-Za-z0-9_.][-A-Za-z0-9_.]*$"


class Variant(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(pattern=NAME_PATTERN)
    cases: list[str] | None = None
    settings: dict[str, Any] = {}
    alternatives: dict[str, dict[str, Any]] | None = None
    xdist_group: str | bool = True

    @pydantic.field_validator("alternatives")
    @classmethod
    def alternative_names(cls, value: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
        for name in value or {}:
            if not re.match(NAME_PATTERN, str(name)):
                raise ValueError(f"alternative name {name!r} must be letters, digits, '-', '_' or '.'")
        return value


def variant_cases(raw: Any, default_globs: list[str] | None, rootdir: Path, source: str,
                  cache_dir: Path | None = None) -> list[Case]:
    """The cases of every variant (ids ``<variant>[-<alternative>]-<case id>``), checked to be unique."""
    where = f"{source}: {VARIANTS_KEY}"
    if not isinstance(raw, list) or not raw:
        raise TopsailError(f"{where}: must be a non-empty list of variants (name, cases, settings, alternatives, "
                           "xdist_group)")
    variants = [validate(Variant, entry, f"{where}[{index}]") for index, entry in enumerate(raw)]
    _check_unique_names(variants, where)
    cases: list[Case] = []
    for index, variant in enumerate(variants):
        globs = variant.cases if variant.cases is not None else default_globs
        if not globs:
            raise TopsailError(f"{where}[{index}].cases: no case files (and the suite has no `cases:` to default to)")
        base = load_cases(globs, rootdir, source=f"{where}[{index}].cases", cache_dir=cache_dir)
        for name, settings in _expanded(variant):
            group = name if variant.xdist_group is True else (variant.xdist_group or None)
            cases += with_variant(base, name, settings, xdist_group=group)
    try:
        check_unique_ids(cases)
    except TopsailError as exc:
        raise TopsailError(f"{where}: {exc}") from None
    return cases


def _expanded(variant: Variant) -> list[tuple[str, dict[str, Any]]]:
    if not variant.alternatives:
        return [(variant.name, variant.settings)]
    return [(f"{variant.name}-{alternative}", deep_merge(variant.settings, settings))
            for alternative, settings in variant.alternatives.items()]


def _check_unique_names(variants: list[Variant], where: str) -> None:
    first: dict[str, int] = {}
    for index, variant in enumerate(variants):
        if variant.name in first:
            raise TopsailError(f"{where}[{index}].name: {variant.name!r} is also the name of "
                               f"{VARIANTS_KEY}[{first[variant.name]}]; variant names must be unique")
        first[variant.name] = index
