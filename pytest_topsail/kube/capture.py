"""What a step leaves in its artifact directory: the manifests it applied, a command that reproduces it, and the
objects and events captured at its end. Secret values are never written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from pytest_topsail.kube.client import Kube, KubeError, ObjectRef
from pytest_topsail.kube.events import events_for, format_event
from pytest_topsail.redact import redact_object

MANIFESTS_DIR = "manifests"
REPRODUCER = "reproduce.sh"


def redact(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy safe to write (the one rule, ``redact_object``: Secret values, env values of secret names, URL
    credentials), managedFields and last-applied annotations dropped."""
    clean = redact_object(obj)
    meta = clean.get("metadata") or {}
    meta.pop("managedFields", None)
    annotations = meta.get("annotations") or {}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return clean


def file_name(obj: dict[str, Any] | ObjectRef, index: int | None = None) -> str:
    ref = obj if isinstance(obj, ObjectRef) else ObjectRef.of(obj)
    parts = [ref.kind.lower()] + ([ref.namespace] if ref.namespace else []) + [ref.name]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", "_".join(parts))
    return f"{index:02d}_{stem}.yaml" if index is not None else f"{stem}.yaml"


def write_manifests(directory: Path, manifests: Iterable[dict[str, Any]], *, start: int = 1) -> list[Path]:
    """Write each manifest to `directory/manifests/NN_kind_ns_name.yaml`; returns the paths written."""
    target = directory / MANIFESTS_DIR
    target.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, manifest in enumerate(manifests, start=start):
        path = target / file_name(manifest, index)
        path.write_text(yaml.safe_dump(redact(manifest), sort_keys=False), encoding="utf-8")
        paths.append(path)
    return paths


def write_reproducer(
    directory: Path, manifest_paths: Iterable[Path], *, context: str | None = None, title: str = ""
) -> Path:
    """Write `reproduce.sh`: `kubectl apply -f` of the manifests, in order, relative to the step directory.

    The kubeconfig is the one of $KUBECONFIG when the script runs (paths and credentials are not recorded).
    """
    kubectl = ["kubectl"] + (["--context", context] if context else [])
    lines = ["#!/bin/sh", f"# Reproduces the step{': ' + title if title else ''} (uses $KUBECONFIG).", "set -e",
             'cd "$(dirname "$0")"']
    for path in manifest_paths:
        relative = path.relative_to(directory) if path.is_relative_to(directory) else path
        lines.append(shlex.join([*kubectl, "apply", "-f", str(relative)]))
    script = directory / REPRODUCER
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def capture(kube: Kube, refs: Iterable[ObjectRef], directory: Path) -> Path:
    """Write the current state of `refs` and their events under `directory/captured/`. Never raises on API errors:
    a capture runs at the end of a step, also a failed one, and must not hide the step's own error.
    """
    target = directory / "captured"
    target.mkdir(parents=True, exist_ok=True)
    event_lines: list[str] = []
    problems: list[str] = []
    for ref in dict.fromkeys(refs):  # keep order, drop duplicates
        try:
            obj = kube.get(ref)
            if obj is not None:
                (target / file_name(ref)).write_text(yaml.safe_dump(redact(obj), sort_keys=False), encoding="utf-8")
            event_lines.extend(format_event(e) for e in events_for(kube, ref))
        except KubeError as exc:
            problems.append(f"{ref}: {exc}")
    (target / "events.txt").write_text("".join(line + "\n" for line in event_lines), encoding="utf-8")
    if problems:
        (target / "capture_errors.txt").write_text("\n".join(problems) + "\n", encoding="utf-8")
    return target
