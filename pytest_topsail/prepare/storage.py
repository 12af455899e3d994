"""The ``storage`` preparation (TOPSAIL's ``storage download_to_pvc``): a PVC in the suite's namespace and, for each
of ``storage.sources``, a Job that downloads it onto the PVC (``/storage/<kind>/<name>`` plus
``<name>.sha256sum``), with the program of download.py carried by a ConfigMap (any image with a Python 3 runs it).

Steps inside ``NNN__storage/``: ``cleanup_before`` (``storage.cleanup.before``), ``pvc``, then one
``download_<name>`` per source. A source already on the PVC (the PVC labelled ``storage.topsail.io/<kind>.<name>``
with its URL's hash, as TOPSAIL labels it) is not downloaded again: its step says so in ``skipped.txt``. On the
simulator the download Job's pod runs download.py as a real local process (the suite's ``cluster.sim.runtime`` entry
for ``storage.image``), so a local source is copied for real.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import pytest

from pytest_topsail.cluster.components import Prep, prepare_component
from pytest_topsail.cluster.settings import ComponentSettings
from pytest_topsail.cluster.state import Cluster
from pytest_topsail.cluster.steps import KubeStep, or_fail
from pytest_topsail.conditions import condition_status
from pytest_topsail.errors import TopsailError
from pytest_topsail.kube.client import ObjectRef
from pytest_topsail.kube.events import pod_logs
from pytest_topsail.kube.wait import delete_and_wait, poll
from pytest_topsail.settings import Settings
from pytest_topsail.suites import Suite

DOWNLOADER = Path(__file__).with_name("download.py")
MOUNT = "/storage"
ENTRYPOINT_DIR = "/opt/topsail"
LABEL_PREFIX = "storage.topsail.io/"
PLAIN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class Source(Settings):
    """One model or dataset to put on the PVC."""

    name: Annotated[str, pydantic.Field(pattern=PLAIN_NAME, max_length=100)]
    kind: Literal["model", "dataset"] = "model"
    # hf://, https://, s3://, file:// or a path as the download pod sees it; a relative path is taken from pytest's
    # rootdir (the simulator's pods see this machine)
    url: Annotated[str, pydantic.Field(min_length=1)]
    sha256: Annotated[str, pydantic.Field(pattern=r"^[0-9a-fA-F]{64}$")] | None = None


class StorageSettings(ComponentSettings):
    """The ``storage`` section (docs/fresh-cluster.md)."""

    timeout_s: float = pydantic.Field(3600, gt=0)  # per download
    pvc: Annotated[str, pydantic.Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)] = \
        "topsail-storage"
    size: str = "80Gi"
    storage_class: str | None = None
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"] = "ReadWriteOnce"
    image: str = "registry.access.redhat.com/ubi9/python-311:latest"
    secret: str | None = None  # a Secret of the namespace whose keys the download gets as env (HF_TOKEN, AWS_*)
    sources: list[Source] = []

    @pydantic.field_validator("sources")
    @classmethod
    def _unique(cls, sources: list[Source]) -> list[Source]:
        seen: set[tuple[str, str]] = set()
        for source in sources:
            if (source.kind, source.name) in seen:
                raise ValueError(f"two sources named {source.name!r} ({source.kind})")
            seen.add((source.kind, source.name))
        return sources


def check_suite(suite: Suite) -> None:
    if "storage" in suite.config:
        suite.settings("storage", StorageSettings)


def prepare_once(request: pytest.FixtureRequest, cluster: Cluster, namespace: str) -> dict[str, Any]:
    rootdir = Path(request.config.rootpath)
    return or_fail(lambda: prepare_component(
        request, cluster, "storage", StorageSettings, lambda prep: prepare(prep, namespace, rootdir),
        lambda prep: cleanup_before(prep, namespace),
        unprepared=lambda prep: {"pvc": prep.settings.pvc, "namespace": namespace, "sources": {}}))


def pvc_ref(settings: StorageSettings, namespace: str) -> ObjectRef:
    return ObjectRef("v1", "PersistentVolumeClaim", settings.pvc, namespace)


def prepare(prep: Prep[StorageSettings], namespace: str, rootdir: Path) -> dict[str, Any]:
    settings = prep.settings
    with prep.step("pvc") as current:
        current.ensure([pvc_manifest(settings, namespace)])
    paths = {}
    for source in settings.sources:
        with prep.step(f"download_{source.kind}_{source.name}") as current:
            download(prep, current, namespace, source, rootdir)
        paths[source.name] = f"{MOUNT}/{source.kind}/{source.name}"
    return {"pvc": settings.pvc, "namespace": namespace, "sources": paths}


def pvc_manifest(settings: StorageSettings, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [settings.access_mode],
                            "resources": {"requests": {"storage": settings.size}}}
    if settings.storage_class:
        spec["storageClassName"] = settings.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": settings.pvc, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "pytest-topsail"}},
            "spec": spec}


def source_label(source: Source) -> tuple[str, str]:
    """The PVC label saying this source is on it: key per kind and name, value the hash of its URL."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", f"{source.kind}.{source.name}")[:63].strip("-._") or source.kind
    return LABEL_PREFIX + name, hashlib.sha256(source.url.encode()).hexdigest()[:16]


def download(prep: Prep[StorageSettings], current: KubeStep, namespace: str, source: Source, rootdir: Path) -> None:
    kube, settings = prep.kube, prep.settings
    key, value = source_label(source)
    claim = kube.get(pvc_ref(settings, namespace)) or {}
    if ((claim.get("metadata") or {}).get("labels") or {}).get(key) == value:
        note = f"{source.url} is on PVC {namespace}/{settings.pvc} already (label {key}={value}): not downloaded again"
        (current.directory / "skipped.txt").write_text(note + "\n", encoding="utf-8")
        prep.progress(f"storage: {note}")
        return
    entrypoint = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "topsail-download-entrypoint", "namespace": namespace},
                  "data": {"download.py": DOWNLOADER.read_text(encoding="utf-8")}}
    job = job_manifest(settings, namespace, source, local_url(source.url, rootdir))
    ref = ObjectRef.of(job)
    delete_and_wait(kube, ref, timeout=prep.timeout)  # a failed Job of an earlier run
    current.ensure([entrypoint, job])
    finished = poll(lambda: kube.get(ref), lambda o: job_state(o) is not None,
                    what=f"Job {namespace}/{ref.name} to download {source.url}", timeout=prep.timeout,
                    progress=prep.progress)
    log = job_log(prep, namespace, ref.name)
    (current.directory / "download.log").write_text(log, encoding="utf-8")
    if job_state(finished) != "Complete":
        tail = "\n".join(log.strip().splitlines()[-5:]) or "(no log)"
        raise TopsailError(f"storage: Job {namespace}/{ref.name} failed to download {source.url} onto PVC "
                           f"{settings.pvc}:\n{tail}")
    kube.patch(pvc_ref(settings, namespace), {"metadata": {"labels": {key: value}}})


def local_url(url: str, rootdir: Path) -> str:
    """A relative path taken from `rootdir`; any other URL as it is."""
    if "://" in url or url.startswith("/"):
        return url
    return str((rootdir / url).resolve())


def job_manifest(settings: StorageSettings, namespace: str, source: Source, url: str) -> dict[str, Any]:
    name = re.sub(r"[^a-z0-9-]+", "-", f"download-{source.name}-to-{settings.pvc}".lower()).strip("-")[:63]
    command = ["python3", f"{ENTRYPOINT_DIR}/download.py", url, f"{MOUNT}/{source.kind}", source.name]
    if source.sha256:
        command += ["--sha256", source.sha256]
    container: dict[str, Any] = {
        "name": "download", "image": settings.image, "command": command,
        "volumeMounts": [{"name": "storage", "mountPath": MOUNT},
                         {"name": "entrypoint", "mountPath": ENTRYPOINT_DIR, "readOnly": True}],
        "terminationMessagePolicy": "FallbackToLogsOnError"}
    if settings.secret:
        container["envFrom"] = [{"secretRef": {"name": settings.secret}}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name.strip("-"), "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "pytest-topsail"}},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "containers": [container],
                "volumes": [{"name": "storage", "persistentVolumeClaim": {"claimName": settings.pvc}},
                            {"name": "entrypoint", "configMap": {"name": "topsail-download-entrypoint"}}]}}}}


def job_state(job: dict[str, Any] | None) -> str | None:
    """``Complete`` or ``Failed`` once the Job ended, else None."""
    return next((end for end in ("Complete", "Failed") if condition_status(job, end) == "True"), None)


def job_log(prep: Prep[StorageSettings], namespace: str, job: str) -> str:
    pods = prep.kube.list("v1", "Pod", namespace=namespace, label_selector=f"job-name={job}")
    return "".join(pod_logs(prep.kube, namespace, pod["metadata"]["name"], container="download") for pod in pods)


def cleanup_before(prep: Prep[StorageSettings], namespace: str) -> None:
    with prep.step("cleanup_before"):
        delete_and_wait(prep.kube, pvc_ref(prep.settings, namespace), timeout=prep.timeout)
