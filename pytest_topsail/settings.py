"""Settings validation with pydantic: suite settings, case settings, any mapping a user wrote.

``validate(Model, data, where)`` returns the model or raises a TopsailError naming the file and every key path
that is wrong (the one formatter is ``errors.describe_validation_error``). ``Settings`` is the base for a suite's
settings models: unknown keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from pytest_topsail.errors import TopsailError, describe_validation_error

M = TypeVar("M", bound=pydantic.BaseModel)


class Settings(pydantic.BaseModel):
    """Base of suite settings models: unknown keys are an error, and values are checked by type, never converted
    (strict): ``keep: "false"`` is no boolean, ``max_failed_jobs: many`` no integer, ``comparison_keys: workload`` no
    list. A number where a float is expected is fine. A field that wants conversion says so with its own
    ``pydantic.Field(strict=False)``."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


def validate(model: type[M], data: Any, where: str, what: str = "", context: dict[str, Any] | None = None) -> M:
    """`data` validated by `model`; a TopsailError "<where>: <what>: key a.b: problem; ..." when it does not fit.
    `context` reaches the model's validators (`info.context`); a suite's settings get ``{"rootdir": Path}``, so a
    validator can read the files a setting names."""
    try:
        return model.model_validate({} if data is None else data, context=context)
    except pydantic.ValidationError as error:
        raise TopsailError(describe_validation_error(error, where, what, model)) from None


def load_module(path: Path, prefix: str) -> Any:
    """Load a suite's Python file (kpis.py, settings.py) by path, without sys.path changes or a lasting module."""
    module_name = f"{prefix}_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TopsailError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pydantic resolves a model's annotations through its module
    try:
        spec.loader.exec_module(module)
    except TopsailError as error:
        raise TopsailError(f"{path}: {error}") from None
    except Exception as error:
        raise TopsailError(f"{path}: failed to load: {type(error).__name__}: {error}") from None
    finally:
        sys.modules.pop(module_name, None)
    return module


def load_settings_models(path: Path) -> dict[str, type[pydantic.BaseModel]]:
    """``SETTINGS`` of a suite's settings.py: configuration key -> pydantic model validating that section."""
    if not path.is_file():
        return {}
    declared = getattr(load_module(path, "topsail_suite_settings"), "SETTINGS", None)
    if not isinstance(declared, dict) or not all(
        isinstance(key, str) and isinstance(model, type) and issubclass(model, pydantic.BaseModel)
        for key, model in declared.items()
    ):
        raise TopsailError(f"{path}: SETTINGS must be a mapping of configuration keys (tests.my_suite) to pydantic "
                           "models")
    return declared
