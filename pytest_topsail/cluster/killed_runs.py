"""What killed runs of the same project left on a real cluster, removed at the start of a run.

A run killed with SIGKILL leaves its run directory (``cluster/rundir.py``) with its cleanup plans and no live
participant: the next run of the project on the same cluster runs those plans and deletes the namespaces labelled
with that run (:func:`remove_killed_runs`; the labels: ``cluster/ownership.py``). Namespaces without our labels (an
operator namespace that was there before) are never touched, nor those of a run that is alive, ended normally (its
run directory is gone: what it kept stays) or ran on another machine (those are named, :func:`unclaimed_namespaces`),
nor a kept one (``topsail.kept=true``).
"""

from __future__ import annotations

from typing import Any

from pytest_topsail.cluster.ownership import PROJECT_LABEL, RUN_LABEL, project_id
from pytest_topsail.cluster.rundir import RunDir
from pytest_topsail.cluster.state import ClusterSession
from pytest_topsail.cluster.steps import run_cleanup_plan
from pytest_topsail.kube.client import Kube, KubeError
from pytest_topsail.kube.namespaces import KEPT_LABEL, delete_namespaces
from pytest_topsail.leftovers import report_leftover
from pytest_topsail.progress import Progress
from pytest_topsail.run import artifacts_root, state_of

LEFTOVERS_TIMEOUT = 300.0  # seconds to remove one killed run's namespaces


def killed_runs(state: ClusterSession, url: str) -> list[RunDir]:
    """The run directories of this machine left by killed runs of this project on the cluster at `url`: someone
    joined, no participant is alive, and the run had connected to that cluster."""
    project, ours = project_id(state_of(state.config).rootdir), state.run.path
    found = []
    for path in sorted(ours.parent.iterdir()):
        if path == ours or not (path / "workers").is_dir():
            continue
        run = RunDir.existing(path)
        try:
            shared = (run.read_result("cluster") or {}).get("result") or {}
        except (OSError, ValueError):
            continue
        if shared.get("url") == url and shared.get("project") == project and run.joined() and not run.alive():
            found.append(run)
    return found


def remove_killed_runs(state: ClusterSession, kube: Kube, url: str) -> dict[str, Any]:
    """At the start of a run on a real cluster: what killed runs of this project left on it is removed (their
    cleanup plans, newest first, then the namespaces labelled with their run), each step in the artifacts."""
    progress = state.progress or Progress(state.config)
    removed: dict[str, Any] = {}
    project = project_id(state_of(state.config).rootdir)
    for run in killed_runs(state, url):
        run_id = run.path.name
        progress(f"run {run_id} of this project was killed: removing what it left on the cluster")
        problems = []
        try:
            plans = run.cleanups()
        except (OSError, ValueError) as error:  # a plan cut short by the kill: its namespaces are still found
            plans, problems = [], [f"cleanup plans in {run.path} unreadable: {error}"]
        for plan in plans:
            problems += run_cleanup_plan(kube, plan, progress, artifacts_root(state.config))
        selector = f"{PROJECT_LABEL}={project},{RUN_LABEL}={run_id}"
        try:
            labelled = kube.list("v1", "Namespace", label_selector=selector)
        except KubeError as error:
            labelled, problems = [], [*problems, str(error)]
        kept = [ns["metadata"]["name"] for ns in labelled
                if ((ns["metadata"].get("labels") or {}).get(KEPT_LABEL)) == "true"]
        names = [ns["metadata"]["name"] for ns in labelled if ns["metadata"]["name"] not in kept]
        for name in kept:
            progress(f"namespace {name} (created by the killed run {run_id}, labelled {KEPT_LABEL}=true): kept, "
                     "as that run was asked to")
        for name in names:
            progress(f"namespace {name} (created by the killed run {run_id}): deleting it")
        left = delete_namespaces(kube, names, timeout=LEFTOVERS_TIMEOUT)
        for name in left:
            report_leftover(f"namespace {name} (left by the killed run {run_id})", kube.command("delete", "namespace",
                                                                                                  name))
        problems += [f"namespace {name} still there {LEFTOVERS_TIMEOUT:g} s after its deletion" for name in left]
        removed[run_id] = {"namespaces": names, "kept": kept, "plans": [plan.get("name") for plan in plans],
                           "problems": problems}
        for problem in problems:
            progress(f"leftovers of run {run_id}: {problem}")
        if not problems:
            run.remove()
    unclaimed = unclaimed_namespaces(state, kube, project)
    for run_id, names in unclaimed.items():
        progress(f"namespace(s) {', '.join(names)} of run {run_id} of this project: not removed, this machine has "
                 "no record of that run (it may be running elsewhere); once it is over: kubectl delete namespaces "
                 f"-l {RUN_LABEL}={run_id}")
    return {**removed, **({"unclaimed": unclaimed} if unclaimed else {})}


def unclaimed_namespaces(state: ClusterSession, kube: Kube, project: str) -> dict[str, list[str]]:
    """Run id -> the namespaces of this project labelled with a run this machine has no run directory of (a run on
    another machine, killed or alive, or one whose directory was wiped), kept ones aside. Only reported: nothing on
    the cluster tells a killed run from a live one elsewhere (docs/reliability.md)."""
    local = {path.name for path in state.run.path.parent.iterdir()}
    try:
        labelled = kube.list("v1", "Namespace", label_selector=f"{PROJECT_LABEL}={project},{RUN_LABEL},!{KEPT_LABEL}")
    except KubeError:
        return {}
    found: dict[str, list[str]] = {}
    for namespace in labelled:
        run_id = str((namespace["metadata"].get("labels") or {}).get(RUN_LABEL))
        if run_id not in local:
            found.setdefault(run_id, []).append(namespace["metadata"]["name"])
    return found
