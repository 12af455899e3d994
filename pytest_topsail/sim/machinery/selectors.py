"""Label and field selectors in the apiserver's string syntax (``app=x,tier in (a,b),!legacy``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pytest_topsail.sim.machinery.apierror import bad_request

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_CMP_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


@dataclass(frozen=True)
class Requirement:
    """One requirement: op is one of "=", "!=", "in", "notin", "exists", "!exists"."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values  # "!=", "notin"

    @property
    def indexable(self) -> bool:
        """True when the matching objects are exactly the union of (key, value) index entries."""
        return self.op in ("=", "in")


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(selector: str | dict[str, str] | None) -> list[Requirement]:
    """Parse a label selector string (or a matchLabels dict). Raises a 400 ApiError if malformed."""
    if not selector:
        return []
    if isinstance(selector, dict):
        return [Requirement(k, "=", frozenset([str(v)])) for k, v in selector.items()]
    requirements = []
    for part in _split_top_level(selector):
        if match := _SET_RE.match(part):
            values = frozenset(v.strip() for v in match["values"].split(",") if v.strip())
            if not all(_VALUE_RE.match(v) for v in values):
                raise bad_request(f'unable to parse requirement: invalid label value in "{part.strip()}"')
            requirements.append(Requirement(match["key"], match["op"], values))
        elif match := _CMP_RE.match(part):
            op = "!=" if match["op"] == "!=" else "="
            requirements.append(Requirement(match["key"], op, frozenset([match["value"]])))
        elif match := _EXISTS_RE.match(part):
            requirements.append(Requirement(match["key"], "!exists" if match["neg"] else "exists"))
        else:
            raise bad_request(f'unable to parse requirement: found "{part.strip()}", invalid label selector')
    return requirements


def label_selector_from_match(selector: dict[str, Any] | None) -> list[Requirement]:
    """Requirements of a metav1.LabelSelector object (matchLabels + matchExpressions)."""
    if not selector:
        return []
    requirements = parse_label_selector(selector.get("matchLabels") or {})
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    for expression in selector.get("matchExpressions") or []:
        op = ops.get(expression.get("operator", ""))
        if op is None:
            raise bad_request(f"invalid label selector operator {expression.get('operator')!r}")
        requirements.append(Requirement(expression["key"], op, frozenset(expression.get("values") or ())))
    return requirements


def labels_match(requirements: list[Requirement], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negate: bool

    def matches(self, obj: dict[str, Any]) -> bool:
        current: Any = obj
        for part in self.path:
            current = current.get(part) if isinstance(current, dict) else None
        actual = "" if current is None else (str(current).lower() if isinstance(current, bool) else str(current))
        return (actual == self.value) != self.negate


def parse_field_selector(selector: str | dict[str, str] | None) -> list[FieldRequirement]:
    """Parse ``metadata.name=x,status.phase!=Running``; any dotted field path is accepted."""
    if not selector:
        return []
    if isinstance(selector, dict):
        return [FieldRequirement(tuple(k.split(".")), str(v), False) for k, v in selector.items()]
    requirements = []
    for part in selector.split(","):
        if not part.strip():
            continue
        for op, negate in (("!=", True), ("==", False), ("=", False)):
            if op in part:
                key, value = part.split(op, 1)
                requirements.append(FieldRequirement(tuple(key.strip().split(".")), value.strip(), negate))
                break
        else:
            raise bad_request(f'invalid field selector: "{part}": expected an operator')
    return requirements


def fields_match(requirements: list[FieldRequirement], obj: dict[str, Any]) -> bool:
    return all(r.matches(obj) for r in requirements)


# Field selectors each built-in resource supports (besides metadata.name and metadata.namespace), as the apiserver.
SUPPORTED_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                             "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
                             "status.nominatedNodeName"}),
    ("", "events"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "replicationcontrollers"): frozenset({"status.replicas"}),
    ("", "persistentvolumeclaims"): frozenset(),
    ("apps", "replicasets"): frozenset({"status.replicas"}),
    ("batch", "jobs"): frozenset({"status.successful"}),
}
_ALWAYS_SUPPORTED = frozenset({"metadata.name", "metadata.namespace"})


def check_field_selector(group: str, plural: str, requirements: list[FieldRequirement]) -> None:
    """400 for a field the apiserver cannot select on for this resource."""
    supported = _ALWAYS_SUPPORTED | SUPPORTED_FIELDS.get((group, plural), frozenset())
    for requirement in requirements:
        path = ".".join(requirement.path)
        if path not in supported:
            raise bad_request(f"field label not supported: {path}")
