"""The cluster faults that ended pods of a scale run (a lost GPU, a lost node, an eviction, a preemption, an OOM
kill, an image that cannot be pulled, a volume that never attaches), read before its namespaces are deleted, through
the one fault-naming mechanism (pytest_topsail.kube.faults: conditions, termination and waiting reasons, Events).
Saved as faults.json; a failed item names them first, and they exclude its KPIs from the history
(docs/reliability.md "Fault catalogue")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_topsail.kube.client import Kube
from pytest_topsail.kube.faults import faults_in

SHOWN = 3  # faults named in a failure message; all of them are in faults.json


def pod_faults(api: Kube, namespaces: list[str], directory: Path) -> list[dict[str, str]]:
    """Each pod of the run's namespaces a cluster fault ended: {kind, namespace, pod, message}; faults.json."""
    found = [{"kind": fault.kind, "namespace": namespace, "pod": pod, "message": fault.message}
             for namespace in namespaces for pod, fault in sorted(faults_in(api, namespace).items())]
    (directory / "faults.json").write_text(json.dumps(found, indent=1), encoding="utf-8")
    return found


def describe_faults(faults: list[dict[str, Any]]) -> str:
    """One line: how many pods, by kind, and the first few messages."""
    kinds: dict[str, int] = {}
    for fault in faults:
        kinds[fault["kind"]] = kinds.get(fault["kind"], 0) + 1
    counts = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    shown = "; ".join(f"{f['kind']}: {f['message']}" for f in faults[:SHOWN])
    more = f" (and {len(faults) - SHOWN} more in faults.json)" if len(faults) > SHOWN else ""
    return f"cluster faults ended {len(faults)} pod(s) ({counts}): {shown}{more}"
