"""A run's simulator profile from what the user wrote, checked once where they gave it.

`build_profile(data, source=...)` builds a profile from a mapping (a suite's `cluster.sim` section) and checks its
`plugins` against the controllers of the run; `load_profile(path, nodes=..., gpu_profile=..., gpus_per_node=...,
seed=..., preinstalled=...)` reads a file (or starts from the defaults when `path` is None) and applies the
command-line shortcuts. Any mistake becomes one TopsailError naming the source and the key. These two are the one
validation path.
`write_built(profile, path)` / `load_built(path)` hand a built profile to the simulator process as JSON (what the
launcher does): the child reads back exactly what was built, with no shortcuts or checks applied again. The model
itself is `pytest_topsail.sim.controllers.profile.Profile`; the reference is docs/simulator-profile.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_topsail.config import parse_yaml
from pytest_topsail.errors import TopsailError, describe_validation_error
from pytest_topsail.sim.controllers import check_plugin_settings
from pytest_topsail.sim.controllers.profile import Profile


def build_profile(data: dict[str, Any] | None, *, source: str = "profile") -> Profile:
    """`Profile.from_dict` with the plugin settings checked by the controllers that own them."""
    profile = Profile.from_dict(data, source=source)
    if profile.plugins:
        check_plugin_settings(profile, source)
    return profile


def load_profile(
    path: str | Path | None,
    *,
    nodes: int | None = None,
    gpu_profile: str | None = None,
    gpus_per_node: int | None = None,
    seed: int | None = None,
    preinstalled: str | None = None,
) -> Profile:
    """Read the profile at `path` (defaults when None) and apply the command-line shortcuts (`preinstalled`: "all"
    or a comma list, replacing the profile's)."""
    source = "command line"
    if path is None:
        profile = Profile()
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TopsailError(f"simulator profile {path}: cannot be read: {exc.strerror or exc}") from None
        try:
            data = parse_yaml(text)
        except yaml.YAMLError as exc:
            raise TopsailError(f"simulator profile {path}: not valid YAML: {exc}") from None
        profile = build_profile(data, source=f"simulator profile {path}")
    return profile.with_overrides(
        nodes=nodes, gpu_profile=gpu_profile, gpus_per_node=gpus_per_node, seed=seed, preinstalled=preinstalled,
        source=source,
    )



def write_built(profile: Profile, path: Path) -> None:
    """Write a built profile for `load_built` (JSON: the same values come back, types and all)."""
    path.write_text(profile.model_dump_json(indent=1), encoding="utf-8")


def load_built(path: str | Path) -> Profile:
    """The profile `write_built` wrote; a TopsailError when the file is missing or was not written by it."""
    try:
        return Profile.model_validate_json(Path(path).read_bytes())
    except OSError as exc:
        raise TopsailError(f"built simulator profile {path}: cannot be read: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise TopsailError(describe_validation_error(exc, f"built simulator profile {path}",
                                                     "not written by write_built")) from None
