"""Lifecycles: any resource (apiVersion + kind) and the named steps its objects go through, as the sampler watches
them (kube-burner #1207 asks for this measurement of any custom resource).

A step is reached when an object version shows it:
- ``condition``: the condition of that type has ``status`` (default "True"); its transition time is the condition's
  ``lastTransitionTime`` (or ``time_field``);
- ``field``: a path into the object (``status.phase``, ``spec.nodeName``) equals ``value``, or holds any value
  (``value: present``, the default); its transition time is the timestamp at ``time_field`` (none without it).
Paths are dot-separated keys; ``key[*]`` is every element of a list (reached when all are; the latest of their
timestamps), ``key[0]`` one element, ``a|b`` the first of two keys present (``state.running|terminated.startedAt``).

The sampler keeps two times per step and object (docs/scale.md): ``watch``, its own clock when it first saw the step,
and ``object``, the transition time written in the object. ``time`` chooses the one a lifecycle reports per step:
``transition`` (the default where the step has one) or ``observed``. A ``failure`` step (Failed) ends an object and
is no transition of the chain: the deltas are between consecutive non-failure steps.

The scale suite's Job and Pod steps are lifecycles of this module too (``POD``, ``SCALE_WORKLOADS``); ``BUILTIN``
names the ready-made ones a suite may configure: pytorchjob, workload (Kueue), inferenceservice.
"""

from __future__ import annotations

import re
from collections.abc import Container
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

import pydantic

from pytest_topsail.errors import TopsailError
from pytest_topsail.settings import validate

PRESENT = "present"
PATH_PART = re.compile(r"^(?P<keys>[A-Za-z0-9_\-]+(\|[A-Za-z0-9_\-]+)*)(\[(?P<index>\*|\d+)\])?$")
RESERVED = ("pods", "workloads")  # the scale run's own lifecycles in sampled.json


def parse_ts(value: Any) -> float | None:
    """RFC 3339 timestamp (whole seconds or fractional) -> epoch milliseconds; None if it is not one."""
    if not value or not isinstance(value, str):
        return None
    return parse_text_ts(value)


@lru_cache(maxsize=4096)  # every event of every object repeats the same few stamps (whole seconds)
def parse_text_ts(value: str) -> float | None:
    try:
        return round(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000.0, 3)
    except ValueError:
        return None


def check_path(path: str) -> str:
    for part in path.split("."):
        if not PATH_PART.match(part):
            raise ValueError(f"path {path!r}: {part!r} is not a key, key[*], key[<n>] or key|other")
    return path


@lru_cache(maxsize=256)
def compiled(path: str) -> tuple[tuple[tuple[str, ...], str | None], ...]:
    """`path` as (alternative keys, index) per part; parsed once (every event of every object resolves it)."""
    parts = []
    for part in path.split("."):
        match = PATH_PART.match(part)
        assert match is not None  # checked when the lifecycle was validated
        parts.append((tuple(match["keys"].split("|")), match["index"]))
    return tuple(parts)


def resolve(obj: Any, path: str) -> list[Any]:
    """The values at `path` (one per element a `[*]` spans); None where the path is missing. An empty list under
    `[*]` gives no value at all."""
    values = [obj]
    for keys, index in compiled(path):
        found = []
        for value in values:
            child = None
            if isinstance(value, dict):
                for key in keys:
                    child = value.get(key)
                    if child is not None:
                        break
            if index is None:
                found.append(child)
            elif isinstance(child, list):
                found.extend(child if index == "*" else child[int(index):int(index) + 1] or [None])
            else:
                found.append(None)
        values = found
    return values


def present(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


class Step(pydantic.BaseModel):
    """One named step of a lifecycle (see the module's docstring)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    condition: str | None = None
    status: Literal["True", "False", "Unknown"] = "True"
    field: str | None = None
    value: Any = PRESENT
    time_field: str | None = None
    time: Literal["transition", "observed"] | None = None  # None: the lifecycle's, else transition where there is one
    failure: bool = False

    @pydantic.field_validator("field", "time_field")
    @classmethod
    def paths(cls, value: str | None) -> str | None:
        return None if value is None else check_path(value)

    @pydantic.model_validator(mode="after")
    def one_test(self) -> Step:
        if (self.condition is None) == (self.field is None):
            raise ValueError(f"step {self.name}: give exactly one of condition (a condition type) or field (a path)")
        if self.time == "transition" and self.condition is None and self.time_field is None:
            raise ValueError(f"step {self.name}: time transition needs a condition or a time_field to read it from")
        return self

    def has_transition(self) -> bool:
        return self.condition is not None or self.time_field is not None

    def state(self, obj: dict[str, Any]) -> tuple[bool, float | None]:
        """(reached, transition time in epoch ms) as this version of the object shows it."""
        if self.condition is not None:
            found = next((c for c in (obj.get("status") or {}).get("conditions") or ()
                          if isinstance(c, dict) and c.get("type") == self.condition), None)
            if found is None or found.get("status") != self.status:
                return False, None
            return True, self.time_at(obj) if self.time_field else parse_ts(found.get("lastTransitionTime"))
        assert self.field is not None
        values = resolve(obj, self.field)
        if not values or not all(present(v) for v in values):
            return False, None
        if self.value != PRESENT and not all(v == self.value for v in values):
            return False, None
        return True, self.time_at(obj) if self.time_field else None

    def time_at(self, obj: dict[str, Any]) -> float | None:
        assert self.time_field is not None
        times = [parse_ts(v) for v in resolve(obj, self.time_field)]
        if not times or any(t is None for t in times):
            return None
        return max(t for t in times if t is not None)


class Lifecycle(pydantic.BaseModel):
    """A resource and its steps; ``label_selector`` narrows the objects (default: every one of the run's
    namespaces)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = pydantic.Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")
    api_version: str = pydantic.Field(pattern=r"^([a-z0-9.\-]+/)?v[0-9a-z]+$")
    kind: str = pydantic.Field(pattern=r"^[A-Z][A-Za-z0-9]*$")
    steps: list[Step] = pydantic.Field(min_length=1)
    label_selector: str | None = None
    time: Literal["transition", "observed"] | None = None  # the default of the steps without their own (where a
    # step has no transition time, transition falls back to observed)

    @pydantic.model_validator(mode="after")
    def distinct_steps(self) -> Lifecycle:
        names = [s.name for s in self.steps]
        if len(set(names)) < len(names):
            raise ValueError(f"lifecycle {self.name}: step names repeat: {names}")
        return self

    @property
    def chain(self) -> list[Step]:
        """The steps the deltas are taken between, in order (failure steps left out)."""
        return [s for s in self.steps if not s.failure]

    def source_of(self, step: Step) -> str:
        """Which of the sampler's two times this lifecycle reports for `step`: "object" or "watch"."""
        chosen = step.time or self.time or ("transition" if step.has_transition() else "observed")
        if chosen == "transition" and not step.has_transition():
            chosen = "observed"  # the lifecycle's default does not apply to a step without a transition time
        return "object" if chosen == "transition" else "watch"

    def states(self, obj: dict[str, Any], skip: Container[str] = ()) -> dict[str, tuple[bool, float | None]]:
        """Each step's (reached, transition time) in this version of `obj`; the steps in `skip` (already reached:
        only their first time counts) are not evaluated."""
        return {step.name: step.state(obj) for step in self.steps if step.name not in skip}


def cond(name: str, condition: str | None = None, **options: Any) -> dict[str, Any]:
    return {"name": name, "condition": condition or name, **options}


CREATED = {"name": "created", "field": "metadata.creationTimestamp", "time_field": "metadata.creationTimestamp"}
FINISHED_AT = "status.containerStatuses[*].state.terminated.finishedAt"
STARTED_AT = "status.containerStatuses[*].state.running|terminated.startedAt"

# The scale run's pods: the steps of docs/scale.md, lower case as sampled.json has them.
POD = Lifecycle.model_validate({"name": "pods", "api_version": "v1", "kind": "Pod", "steps": [
    CREATED,
    cond("scheduled", "PodScheduled"),
    cond("initialized", "Initialized"),
    {"name": "started", "field": STARTED_AT, "time_field": STARTED_AT},
    cond("ready", "Ready"),
    {"name": "completed", "field": "status.phase", "value": "Succeeded", "time_field": FINISHED_AT},
    {"name": "failed", "field": "status.phase", "value": "Failed", "time_field": FINISHED_AT, "failure": True},
]})

# The scale run's workload kinds: created, completed (where the kind completes), failed.
SCALE_WORKLOADS = {
    kind: Lifecycle.model_validate({"name": "workloads", "api_version": api_version, "kind": kind, "steps": steps})
    for api_version, kind, steps in (
        ("batch/v1", "Job", [CREATED, cond("completed", "Complete", time_field="status.completionTime"),
                             cond("failed", "Failed", failure=True)]),
        ("kubeflow.org/v1", "PyTorchJob", [CREATED, cond("completed", "Succeeded"),
                                           cond("failed", "Failed", failure=True)]),
        ("apps/v1", "Deployment", [CREATED]),
    )
}

BUILTIN_LIFECYCLES: dict[str, dict[str, Any]] = {
    "pytorchjob": {"name": "pytorchjob", "api_version": "kubeflow.org/v1", "kind": "PyTorchJob",
                   "steps": [cond("Created"), cond("Running"), cond("Succeeded"), cond("Failed", failure=True)]},
    "workload": {"name": "workload", "api_version": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                 "steps": [cond("QuotaReserved"), cond("Admitted"), cond("Finished")]},
    "inferenceservice": {"name": "inferenceservice", "api_version": "serving.kserve.io/v1beta1",
                         "kind": "InferenceService", "steps": [cond("PredictorReady"), cond("Ready")]},
}
BUILTIN = BUILTIN_LIFECYCLES


def builtin(name: str, **overrides: Any) -> Lifecycle:
    """A built-in lifecycle by name, e.g. ``builtin("pytorchjob", time="observed")``."""
    if name not in BUILTIN:
        raise TopsailError(f"unknown built-in lifecycle {name!r}; built-ins: {', '.join(BUILTIN)}")
    return Lifecycle.model_validate({**BUILTIN[name], **overrides})


def parse_lifecycles(raw: Any, where: str) -> list[Lifecycle]:
    """A suite's ``lifecycle:`` list: built-in names (``pytorchjob``), built-ins with overrides (``{builtin:
    workload, time: observed}``) or whole lifecycles (``{name, api_version, kind, steps: [...]}``)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TopsailError(f"{where}: a list of lifecycles (built-in names or mappings), got {raw!r}")
    lifecycles: list[Lifecycle] = []
    for index, entry in enumerate(raw):
        here = f"{where}[{index}]"
        if isinstance(entry, str):
            entry = {"builtin": entry}
        if not isinstance(entry, dict):
            raise TopsailError(f"{here}: a built-in name or a mapping, got {entry!r}")
        if "builtin" in entry:
            name = entry["builtin"]
            if name not in BUILTIN:
                raise TopsailError(f"{here}: unknown built-in lifecycle {name!r}; built-ins: {', '.join(BUILTIN)}")
            entry = {**BUILTIN[name], **{k: v for k, v in entry.items() if k != "builtin"}}
        lifecycle = validate(Lifecycle, entry, here, "invalid lifecycle")
        if lifecycle.name in RESERVED or lifecycle.name in {x.name for x in lifecycles}:
            raise TopsailError(f"{here}: lifecycle name {lifecycle.name!r} is taken (the run's own: "
                               f"{', '.join(RESERVED)}; or given twice)")
        lifecycles.append(lifecycle)
    return lifecycles
