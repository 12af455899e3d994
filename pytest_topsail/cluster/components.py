"""The sequence of one cluster component, once per run: ``cleanup.before``, ``prepare`` (or use the cluster as it is),
then ``cleanup.after`` at the end of the run unless ``keep``; a failed preparation removes what it created.

Product fixtures (fixtures/gpu_operator.py, rhoai.py) give ``prepare_component`` their settings model (a subclass
of ``topsail.ComponentSettings``) and their ``prepare``/``cleanup_before`` functions; each works with a
:class:`Prep` whose ``step(name)`` is a ``kube_step`` numbered inside the component's ``NNN__<name>/`` directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
import yaml

from pytest_topsail.artifacts import step
from pytest_topsail.cluster.ownership import disown_namespaces
from pytest_topsail.cluster.settings import ComponentSettings, section_settings, source_suite, where
from pytest_topsail.cluster.state import Cluster, ClusterSession, cluster_session
from pytest_topsail.cluster.steps import KubeStep, Ownership, kube_step, rollback
from pytest_topsail.config import Config
from pytest_topsail.kube.client import Kube
from pytest_topsail.kube.namespaces import KEPT
from pytest_topsail.progress import Progress
from pytest_topsail.run import artifacts_root

WAITS_PER_COMPONENT = 8  # the most timed waits one component does (gpu_operator: 7)
C = TypeVar("C", bound=ComponentSettings)


@dataclass
class Prep(Generic[C]):
    """What a component's preparation works with."""

    cluster: Cluster
    settings: C
    source: str  # where the settings come from ("suites/x/config.yaml: gpu_operator" or the built-in defaults)
    owner: Ownership
    progress: Progress
    directory: Path  # the component's NNN__<name>/ directory; its steps are numbered inside it
    config: Config | None = None  # the configuration the settings come from (its command_args.yaml.j2), if any

    @property
    def kube(self) -> Kube:
        return self.cluster.kube

    @property
    def timeout(self) -> float:
        return self.settings.timeout_s

    def step(self, name: str) -> AbstractContextManager[KubeStep]:
        return kube_step(name, self.kube, self.owner, self.progress, self.directory)


def prepare_component(
    request: pytest.FixtureRequest,
    cluster: Cluster,
    name: str,
    model: type[C],
    prepare: Callable[[Prep[C]], dict[str, Any]],
    cleanup_before: Callable[[Prep[C]], None],
    unprepared: Callable[[Prep[C]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the component's sequence once per run (xdist: the first worker runs it, the others wait for its result or
    fail with its error) and register its cleanup. Its settings are the `name` section validated by `model`.
    Returns the JSON result of `prepare` (of `unprepared` when the configuration says ``prepare: false``)."""
    state = cluster_session(request.config)
    settings = section_settings(request, name, model)
    suite = source_suite(request, name)
    source = where(suite, name)
    wait = WAITS_PER_COMPONENT * settings.timeout_s + 120  # the first worker may use every wait fully
    steps = (prepare, cleanup_before, unprepared or (lambda prep: {}))
    config = suite.config if suite is not None else None
    return state.run.run_once(name, lambda: _sequence(state, cluster, name, settings, source, *steps, config=config),
                              wait_timeout=wait)


def _sequence(state: ClusterSession, cluster: Cluster, name: str, settings: C, source: str,
              prepare: Callable[[Prep[C]], dict[str, Any]], cleanup_before: Callable[[Prep[C]], None],
              unprepared: Callable[[Prep[C]], dict[str, Any]], config: Config | None = None) -> dict[str, Any]:
    progress = state.progress or Progress(state.config)
    journal = None  # what the preparation created so far, for the next run if this one is killed meanwhile
    if not settings.keep and not state.discards_cluster:
        def journal(owner: Ownership) -> None:
            state.run.write_pending(name, owner.plan(settings.timeout_s))
    if settings.keep and not state.discards_cluster:  # its namespaces kept from their creation, killed run or not
        cluster = dataclasses.replace(cluster, kube=cluster.kube.with_namespace_labels(KEPT))
    with step(name, artifacts_root(state.config)) as directory:
        prep = Prep(cluster, settings, source, Ownership(name, journal=journal), progress, directory, config)
        result: dict[str, Any] = {"prepared": False, "created": []}
        try:
            if settings.cleanup.before:
                cleanup_before(prep)
            if settings.prepare:
                result.update(prepare(prep), prepared=True)
            else:
                note = f"{name}: prepare is false in {source}: the cluster is used as it is"
                (directory / "skipped.txt").write_text(note + "\n", encoding="utf-8")
                progress(note)
                result.update(unprepared(prep))
        except BaseException:
            if not settings.keep and not state.discards_cluster:
                rollback(cluster.kube, prep.owner, progress)
            state.run.drop_pending(name)
            raise
        result["created"] = [str(ref) for ref in prep.owner.created]
        (directory / "created.yaml").write_text(yaml.safe_dump(result["created"]), encoding="utf-8")
        register_cleanup(state, prep.owner, progress, keep=settings.keep or not settings.cleanup.after,
                         timeout=settings.timeout_s)
        state.run.drop_pending(name)
    return result


def register_cleanup(state: ClusterSession, owner: Ownership, progress: Progress, *, keep: bool,
                     timeout: float) -> None:
    """What `owner` created is deleted at the end of the run (last process out) unless kept or discarded anyway."""
    if not owner.created:
        return
    if keep:
        progress(f"{owner.name}: kept on the cluster (keep / cleanup.after)")
        disown_namespaces(state, owner)
    elif state.discards_cluster:
        progress(f"{owner.name}: no cleanup needed, the simulated cluster is discarded at the end")
    else:
        state.run.add_cleanup(owner.plan(timeout))
