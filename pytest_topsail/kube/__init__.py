"""The one Kubernetes access layer: client setup with retries, apply/get/list/patch/delete, waits with timeouts,
events and logs, captures of objects, port-forwards, namespaces, scheduling diagnosis.

The front: its everyday names are ``topsail.*`` (``topsail.Kube``, ``connect``, ``ObjectRef``, ``KubeError``,
``wait_for``, ``wait_condition``, ``wait_deleted``, ``WaitTimeout``, ``create_namespace``, ``delete_namespaces``);
the names of ``__all__`` here are the rest a suite or fixture module may use (``from pytest_topsail.kube import
pod_logs``): a pod's logs (``pod_logs``), polling any state (``poll``) or a pod phase (``wait_phase``), deleting
objects and waiting until they are gone (``delete_and_wait``), a port-forward (``PortForward``), secrets taken out
of text (``redact``), why a pod can never be scheduled (``never_schedulable``), which cluster fault ended a pod
(``cluster_fault``), or each pod of a namespace (``faults_in``). Never a module of the package. Names
load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_topsail.fronts import lazy_front

# public name -> module defining it
_EXPORTS = {
    "redact": "pytest_topsail.kube.capture",
    "cluster_fault": "pytest_topsail.kube.faults",
    "faults_in": "pytest_topsail.kube.faults",
    "pod_logs": "pytest_topsail.kube.events",
    "PortForward": "pytest_topsail.kube.portforward",
    "never_schedulable": "pytest_topsail.kube.scheduling",
    "delete_and_wait": "pytest_topsail.kube.wait",
    "poll": "pytest_topsail.kube.wait",
    "wait_phase": "pytest_topsail.kube.wait",
}
__all__ = [
    "PortForward", "cluster_fault", "delete_and_wait", "faults_in", "never_schedulable", "pod_logs", "poll", "redact",
    "wait_phase",
]

if TYPE_CHECKING:
    from pytest_topsail.kube.capture import redact
    from pytest_topsail.kube.events import pod_logs
    from pytest_topsail.kube.faults import cluster_fault, faults_in
    from pytest_topsail.kube.portforward import PortForward
    from pytest_topsail.kube.scheduling import never_schedulable
    from pytest_topsail.kube.wait import delete_and_wait, poll, wait_phase

__getattr__, __dir__ = lazy_front(__name__, _EXPORTS)
