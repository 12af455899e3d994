"""The simulator profile of a run from the suites' ``cluster.sim`` sections: a named shape, node pools per suite,
extra controllers checked at start-up, and the operator behaviour handed to the simulated operators."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from pytest_topsail.cluster.settings import ClusterSettings, suite_settings, where
from pytest_topsail.errors import TopsailError
from pytest_topsail.hardware import SHAPES
from pytest_topsail.suites import Suite, load_suites_in_scope

if TYPE_CHECKING:
    from pytest_topsail.kube.client import Kube
    from pytest_topsail.sim.controllers.profile import Profile

OPERATORS_CONFIGMAP = ("kube-system", "topsail-sim-operators", "behaviour.yaml")  # read by sim/controllers/olm.py
FIXTURE_KEYS = ("shape", "operators")  # keys of cluster.sim read by this fixture, not part of the simulator profile
POOL_KEYS = ("shape", "nodes", "gpu_profile", "gpus_per_node", "node_pools")  # a suite's shape: its own pools



def sim_profile(raw: dict[str, Any], source: str) -> tuple[Profile, dict[str, Any] | None]:
    """The simulator profile from a `cluster.sim` mapping (a named `shape` sets the first pool) and the operator
    behaviour; `source` names the cluster section ("suites/x/config.yaml: cluster")."""
    from pytest_topsail.sim.run.profile import build_profile

    where = f"{source}.sim"
    profile = {k: v for k, v in raw.items() if k not in FIXTURE_KEYS}
    shape = raw.get("shape")
    if shape:
        if shape not in SHAPES:
            raise TopsailError(f"{where}.shape: unknown shape {shape!r}; known: {', '.join(SHAPES)}")
        profile.update(SHAPES[shape])
    validated = build_profile(profile, source=where)  # a clear error naming the key, before any process starts
    operators = raw.get("operators")
    if operators is not None and not isinstance(operators, dict):
        raise TopsailError(f"{where}.operators must be a mapping (install_ms, ready_ms, never_ready)")
    return validated, operators


PROFILE_KEY = pytest.StashKey[tuple["Profile", "dict[str, Any] | None"]]()


def run_sim_profile(config: pytest.Config) -> tuple[Profile, dict[str, Any] | None]:
    """``build_run_profile``, once per process: checked at start-up, then used as is by the simulator's start."""
    built = config.stash.get(PROFILE_KEY, None)
    if built is None:
        built = config.stash[PROFILE_KEY] = build_run_profile(config)
    return built


def sim_runtime_images(config: pytest.Config) -> list[str]:
    """The image patterns (fnmatch) whose containers the run's simulated cluster runs as real local processes: the
    ``cluster.sim.runtime`` entries of the suites in scope, joined. A suite checks its own images against them."""
    return [entry.image for entry in run_sim_profile(config)[0].runtime]


def build_run_profile(config: pytest.Config) -> tuple[Profile, dict[str, Any] | None]:
    """The profile of the one simulator of the run. With one suite declaring ``cluster.sim``, its profile. With
    several, each suite's shape becomes its own node pools (named ``<suite>-<pool>``) and the other keys they set
    are merged; two suites setting one key to different values is a TopsailError naming the key and both files.
    The profile is built here once and given to ``SimCluster`` as is (the child reads it back without re-checking)."""
    declaring = [s for s in sorted(load_suites_in_scope(config), key=lambda s: s.name)
                 if isinstance(s.config.get("cluster", None), dict) and "sim" in s.config.get("cluster")]
    if len(declaring) <= 1:
        suite = declaring[0] if declaring else None
        profile, operators = sim_profile(suite_sim(suite), where(suite, "cluster"))
        return with_controllers(profile, Path(config.rootpath)), operators
    from pytest_topsail.sim.run.profile import build_profile

    pools: list[dict[str, Any]] = []
    merged: dict[str, Any] = {}
    sources: dict[tuple[str, ...], str] = {}  # key path -> the file that set it
    for suite in declaring:
        own = suite_sim(suite)
        profile, _ = sim_profile(own, where(suite, "cluster"))  # each suite's shape checked on its own, naming its file
        prefix = re.sub(r"[^a-z0-9-]+", "-", suite.name.lower()).strip("-")
        pools += [{**pool, "name": f"{prefix}-{pool['name']}"[:40].rstrip("-")}
                  for pool in profile.to_dict()["node_pools"]]
        _merge(merged, {k: v for k, v in own.items() if k not in POOL_KEYS}, (), suite.config.source, sources)
    operators = merged.pop("operators", None)
    files = "cluster.sim of " + ", ".join(s.config.source for s in declaring)
    validated = build_profile({**merged, "node_pools": pools}, source=files)
    return with_controllers(validated, Path(config.rootpath)), operators


def suite_sim(suite: Suite | None) -> dict[str, Any]:
    """A suite's ``cluster.sim`` with ``preinstalled`` defaulted: a suite with a ``cluster.stack`` prepares its cluster
    itself and gets a fresh one (``[]``); one without (or no suite) gets the stack there from the start (``all``),
    since nothing of the run would install it (docs/fresh-cluster.md)."""
    settings = suite_settings(suite, "cluster", ClusterSettings)
    if "preinstalled" in settings.sim:
        return settings.sim
    return {**settings.sim, "preinstalled": [] if settings.stack else ["all"]}


def _merge(into: dict[str, Any], new: dict[str, Any], path: tuple[str, ...], source: str,
           sources: dict[tuple[str, ...], str]) -> None:
    """`new` merged into `into`: mappings key by key (a key holding dots, such as a model name, stays one key), the
    `runtime` tables joined (each suite's real workloads: its own images), `preinstalled` too (what any suite does
    not prepare itself is there from the start), a value two suites set differently is a
    TopsailError naming the key and both files."""
    for key, value in new.items():
        here = (*path, key)
        current = into.get(key)
        if here in (("runtime",), ("preinstalled",)) and isinstance(value, list) and isinstance(current, list):
            into[key] = current + [entry for entry in value if entry not in current]
        elif isinstance(value, dict) and (key not in into or isinstance(current, dict)):
            _merge(into.setdefault(key, {}), value, here, source, sources)
        elif key in into and current != value:
            raise TopsailError(f"cluster.sim.{'.'.join(here)}: the suites of this run share one simulated cluster and "
                               f"disagree: {sources.get(here, 'another suite')} sets {current!r}, {source} sets "
                               f"{value!r}; run them separately or set the same value")
        else:
            into[key] = value
            sources.setdefault(here, source)


def with_controllers(profile: Profile, rootdir: Path) -> Profile:
    """The profile's extra controllers with file paths made absolute (relative to the rootdir, like case files),
    each loaded once here so that a wrong one stops the run at start, not the simulator later."""
    from pytest_topsail.sim.controllers import controller_class

    specs = []
    for index, spec in enumerate(profile.controllers):
        module, _, name = spec.partition(":")
        if module.endswith(".py") and not Path(module).is_absolute():
            spec = f"{rootdir / module}:{name}"
        try:
            controller_class(spec)
        except TopsailError as error:
            raise TopsailError(f"cluster.sim.controllers[{index}]: {error}") from None
        specs.append(spec)
    return profile.model_copy(update={"controllers": specs})




def describe_pools(profile: Profile) -> str:
    return ", ".join(f"{p.count} x {p.gpus_per_node or 'default'} {p.gpu_profile}" for p in profile.node_pools)


def write_operator_behaviour(kube: Kube, operators: dict[str, Any]) -> None:
    namespace, name, key = OPERATORS_CONFIGMAP
    kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                "data": {key: yaml.safe_dump(operators, sort_keys=False)}})

