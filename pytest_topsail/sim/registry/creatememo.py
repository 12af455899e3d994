"""The create path's memo: what a create made of a body's content outside metadata, shared by the next creates of
the same content (the Store's ``_create`` and ``_remember_checked``; tests/sim/test_create_path.py checks that a
remembered create stores what a fresh one does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.registry.schema import FieldValidation

Obj = dict[str, Any]


@dataclass(frozen=True)
class CheckedBody:
    """What a create made of a body's fields outside kind, apiVersion and metadata: the stored object's fields
    (checked, defaulted, without unknown fields) and the managedFields tree of each body field. Pods are created by
    the thousand from one manifest or template, differing only in metadata: a create whose body has the same content
    there shares these parts (the store never mutates what it holds) instead of checking and defaulting them again."""

    parts: Obj
    trees: dict[str, Obj]


HEAD = ("kind", "apiVersion", "metadata")
# Kinds whose defaults and checks of the fields outside metadata read nothing of the metadata (a Job's defaults
# use its name and uid; a Namespace's touch its labels).
MEMO_KINDS = {("", "pods"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")}
MEMO_LIMIT = 1024


def content_key(rtype: ResourceType, obj: Any, validation: FieldValidation | None) -> tuple[Any, ...] | None:
    """The key of a create body's non-metadata content for ``CheckedBody`` (None: not remembered). Its JSON says
    every value and the keys' order (what the stored object and its encoding depend on), except that NaN and
    infinities are written as null like None: bodies holding a null are not remembered."""
    if rtype.key not in MEMO_KINDS or rtype.crd_name or not isinstance(obj, dict):
        return None
    try:
        raw = orjson.dumps({k: v for k, v in obj.items() if k not in HEAD})
    except TypeError:  # not JSON orjson writes (integers beyond 64 bits, keys that are not strings)
        return None
    if b"null" in raw:
        return None
    return (rtype.key, rtype.version, validation is None, tuple(obj), raw)


def head(obj: Obj) -> Obj:
    return {k: obj[k] for k in HEAD if k in obj}
