"""Simple operators described as data, kwok-style: stages read from YAML (operator_stages.yaml in this package).

A stage names a resource (`plural.group`, or `plural` for the core group), a `when` (a Jinja expression on the
object `obj` and the stage's `vars`), a `delay` (milliseconds, or the name of an `OperatorBehaviour` field such as
`ready_ms`, read from the operators' ConfigMap when the stage is reached), and what follows: the object's next
`status` (a Jinja template rendering YAML) and an optional `event`. When an object of the resource changes (or an
object of a resource the stage `watch`es), the first stage whose `when` holds is the object's stage; after its delay
(counted once per object and stage, from the moment the stage first held) the stage is applied if it still holds.

`vars` are Jinja templates rendering YAML, evaluated in order before `when`. The templates see `obj`, `now` (RFC 3339
seconds) and the functions `objects(resource, labels=None)` (labels: a mapping or a selector string such as
`a=true,!b`), `served(resource)` (whether the API serves the kind), `condition(obj, type)` (the condition, `{}` when
absent) and `advertises(node, resource)` (a Ready node with a positive allocatable amount). Undefined fields chain to
an empty value (`obj.status.phase` of an object without status), so `when` reads like a field selector.

`load_stages(path)` (pure) validates a stage file; `StagesController` applies the stages to the store.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Hashable
from pathlib import Path
from typing import Any, cast

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_topsail.errors import TopsailError, describe_validation_error
from pytest_topsail.sim.controllers.base import condition, now_seconds
from pytest_topsail.sim.controllers.olm import OperatorBehaviour, OperatorController
from pytest_topsail.yamlparse import parse_yaml

log = logging.getLogger(__name__)

STAGES_FILE = Path(__file__).with_name("operator_stages.yaml")
_ENV = jinja2.Environment(undefined=jinja2.ChainableUndefined, autoescape=False, trim_blocks=True, lstrip_blocks=True)


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reason: str
    message: str  # a Jinja template
    type: str = "Normal"
    source: str = "operator"


class StageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    resource: str  # "plural.group" or "plural"
    when: str = "true"  # Jinja expression
    watch: list[str] = Field(default_factory=list)  # other resources whose changes re-evaluate this one's objects
    vars: dict[str, str] = Field(default_factory=dict)  # name -> Jinja template rendering YAML
    delay: float | str = 0  # ms, or an OperatorBehaviour field
    status: str  # Jinja template rendering the next status (YAML)
    event: Event | None = None

    @field_validator("when", "status", "vars")
    @classmethod
    def _compiles(cls, value: Any) -> Any:
        for text in value.values() if isinstance(value, dict) else [value]:
            try:
                _ENV.parse(text)
            except jinja2.TemplateSyntaxError as exc:
                raise ValueError(f"not a valid Jinja template: {exc.message} (line {exc.lineno})") from None
        return value

    @field_validator("delay")
    @classmethod
    def _known_delay(cls, value: float | str) -> float | str:
        if isinstance(value, str) and value not in OperatorBehaviour.model_fields:
            raise ValueError(f"{value!r} is no operator behaviour field; known: "
                             f"{', '.join(sorted(OperatorBehaviour.model_fields))}")
        if not isinstance(value, str) and value < 0:
            raise ValueError("a delay is not negative")
        return value

    @property
    def key(self) -> tuple[str, str]:
        return resource_key(self.resource)


def resource_key(resource: str) -> tuple[str, str]:
    """(group, plural) of "plural.group" / "plural"."""
    plural, _, group = resource.partition(".")
    return (group, plural)


def load_stages(path: Path = STAGES_FILE) -> list[StageSpec]:
    """The stages of a file (a YAML list); one TopsailError naming the file and the stage when one is wrong."""
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TopsailError(f"simulator stages {path}: cannot be read: {exc}") from None
    if not isinstance(data, list):
        raise TopsailError(f"simulator stages {path}: must be a list of stages")
    stages = []
    for index, item in enumerate(data):
        try:
            stages.append(StageSpec.model_validate(item))
        except ValidationError as exc:
            name = item.get("name") if isinstance(item, dict) else None
            raise TopsailError(describe_validation_error(exc, f"simulator stages {path}",
                                                         f"stage [{index}] {name or ''}".rstrip())) from None
    return stages


@functools.cache
def _expression(text: str) -> Any:
    return _ENV.compile_expression(text, undefined_to_none=True)


@functools.cache
def _template(text: str) -> jinja2.Template:
    return _ENV.from_string(text)


def _yaml(text: str, stage: StageSpec, what: str) -> Any:
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        raise TopsailError(f"simulator stage {stage.name}: {what} does not render YAML: {exc}") from None


def evaluate(stage: StageSpec, obj: dict[str, Any], functions: dict[str, Any]) -> dict[str, Any] | None:
    """The template context of `stage` for `obj` when its `when` holds, else None (pure given `functions`)."""
    context: dict[str, Any] = {"obj": obj, "now": now_seconds(), **functions}
    for name, text in stage.vars.items():
        context[name] = _yaml(_template(text).render(context), stage, f"vars.{name}")
    return context if _expression(stage.when)(context) else None


def next_state(stage: StageSpec, context: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The status the stage writes and the message of its event (None without an event)."""
    status = _yaml(_template(stage.status).render(context), stage, "status") or {}
    if not isinstance(status, dict):
        raise TopsailError(f"simulator stage {stage.name}: status renders {type(status).__name__}, not a mapping")
    message = _template(stage.event.message).render(context).strip() if stage.event else None
    return status, message


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return condition(obj, kind) or {}


def advertises(node: dict[str, Any], resource: str) -> bool:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return _condition(node, "Ready").get("status") == "True" and str(allocatable.get(resource, "0")) not in ("", "0")


class StagesController(OperatorController):
    """Applies the stages of operator_stages.yaml (`stages_file` in a subclass for another file)."""

    name = "stages"
    stages_file: Path = STAGES_FILE

    async def on_start(self) -> None:
        self.stages = load_stages(self.stages_file)
        self.elapsed: set[tuple[str, str]] = set()  # (uid, stage name) whose delay is over
        self.functions = {"objects": self._objects, "condition": _condition, "advertises": advertises,
                          "served": self._served}
        for watched, owners in self._watchers().items():
            self.watch_key(watched, self._watched_changed(owners))
        for key in dict.fromkeys(stage.key for stage in self.stages):
            self.watch_key(key, self._changed(key))
            self._enqueue_all(key)  # the objects created before this controller started

    def _watchers(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        watchers: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for stage in self.stages:
            for resource in stage.watch:
                owners = watchers.setdefault(resource_key(resource), [])
                if stage.key not in owners:
                    owners.append(stage.key)
        return watchers

    def _changed(self, key: tuple[str, str]) -> Any:
        def handler(event_type: str, obj: dict[str, Any]) -> None:
            meta = obj.get("metadata") or {}
            if event_type == "DELETED":
                self.elapsed = {e for e in self.elapsed if e[0] != meta.get("uid")}
            else:
                self.enqueue((key, meta.get("namespace") or "", meta.get("name") or ""))
        return handler

    def _watched_changed(self, owners: list[tuple[str, str]]) -> Any:
        def handler(event_type: str, obj: dict[str, Any]) -> None:
            for key in owners:
                self._enqueue_all(key)
        return handler

    def _enqueue_all(self, key: tuple[str, str]) -> None:
        rtype = self.type_of(*key)
        for obj in self.store.list(rtype) if rtype is not None else ():
            self.enqueue((key, obj["metadata"].get("namespace") or "", obj["metadata"]["name"]))

    def _objects(self, resource: str, labels: dict[str, str] | str | None = None) -> list[dict[str, Any]]:
        rtype = self.type_of(*resource_key(resource))
        return self.store.list(rtype, label_selector=labels) if rtype is not None else []

    def _served(self, resource: str) -> bool:
        return self.type_of(*resource_key(resource)) is not None

    async def reconcile(self, key: Hashable) -> None:
        rkey, namespace, name = cast(tuple[tuple[str, str], str, str], key)
        rtype = self.type_of(*rkey)
        obj = self.store.find(rtype, namespace or None, name) if rtype is not None else None
        if obj is None:
            return
        for stage in self.stages:
            if stage.key != rkey:
                continue
            context = evaluate(stage, obj, self.functions)
            if context is None:
                continue
            if self._delay_over(stage, obj, key):
                self._apply(stage, rtype, obj, context)
            return

    def _delay_over(self, stage: StageSpec, obj: dict[str, Any], key: Hashable) -> bool:
        done = (obj["metadata"].get("uid") or "", stage.name)
        if done in self.elapsed:
            return True
        delay = getattr(self.behaviour(), stage.delay) if isinstance(stage.delay, str) else stage.delay
        if delay <= 0:
            return True
        if not self.has_timer(("delay", done)):
            self.call_later(delay / 1000.0, ("delay", done), self._elapse, done, key)
        return False

    def _elapse(self, done: tuple[str, str], key: Hashable) -> None:
        self.elapsed.add(done)
        self.enqueue(key)

    def _apply(self, stage: StageSpec, rtype: Any, obj: dict[str, Any], context: dict[str, Any]) -> None:
        status, message = next_state(stage, context)
        self.set_status(rtype, obj, status)
        if stage.event is not None and message is not None:
            self.store.record_event(obj, stage.event.reason, message, stage.event.type, source=stage.event.source)
