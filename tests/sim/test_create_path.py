"""Creates of bodies alike outside their metadata (pods of one manifest or template): the store reuses what it made
of the first one's fields; every answer must be what a store seeing the body for the first time gives."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from pytest_topsail.sim.api import messages
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.registry.schema import FieldValidation
from pytest_topsail.sim.registry.store import Store

SPEC = {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "infinity"],
                        "resources": {"requests": {"cpu": "50m", "memory": "1Mi"}}}]}
VOLATILE = ("uid", "resourceVersion")


def _pod(name: str, spec: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **metadata},
            "spec": copy.deepcopy(SPEC if spec is None else spec)}


BODIES = [
    _pod("plain", labels={"app": "a"}),
    _pod("other-labels", labels={"app": "b", "tier": "x"}),
    _pod("no-labels"),
    _pod("bad-label", labels={"app": "has space"}),
    _pod("unknown-metadata-field", labels={"app": "a"}, colour="red"),
    _pod("Bad_Name", labels={"app": "a"}),
    _pod("annotated", annotations={"note": "x"}, labels={"app": "a"}),
    _pod("number-label", labels={"app": 1}),
    {"kind": "Pod", "spec": copy.deepcopy(SPEC), "apiVersion": "v1", "metadata": {"name": "keys-reordered"}},
    {"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "wrong-kind"}, "spec": copy.deepcopy(SPEC)},
    _pod("nan-priority", {**SPEC, "priority": float("nan")}),  # encoded as null, like the None of "null-priority"
]


def _outcome(store: Store, body: dict[str, Any], controller: bool) -> Any:
    validation = None if controller else FieldValidation("Warn")
    try:
        created = store.create(store.resource_type("pods"), copy.deepcopy(body), "default",
                               manager=None if controller else "kubectl", field_validation=validation)
    except ApiError as error:
        return error.code, error.message
    metadata = {key: value for key, value in created["metadata"].items() if key not in VOLATILE}
    return {**created, "metadata": metadata}, validation.warnings if validation else None


@pytest.mark.parametrize("controller", [False, True], ids=["api", "controller"])
def test_a_body_like_an_earlier_one_gets_the_answer_of_a_first_one(controller: bool) -> None:
    warm = Store(seed=1, clock=lambda: 1_700_000_000.0)
    for first_body in (_pod("first", labels={"app": "a"}), _pod("null-priority", {**SPEC, "priority": None})):
        first = _outcome(warm, first_body, controller)
        assert isinstance(first, tuple) and isinstance(first[0], dict), first
    for body in BODIES:
        fresh = Store(seed=1, clock=lambda: 1_700_000_000.0)
        assert _outcome(warm, body, controller) == _outcome(fresh, body, controller), body["metadata"]["name"]


def test_pods_alike_outside_metadata_are_checked_each_time() -> None:
    store = Store(seed=1)
    pods = store.resource_type("pods")
    store.create(pods, _pod("one"), "default", manager="kubectl", field_validation=FieldValidation("Warn"))
    with pytest.raises(ApiError) as invalid:
        store.create(pods, _pod("two", labels={"bad key!": "x"}), "default", manager="kubectl",
                     field_validation=FieldValidation("Warn"))
    assert invalid.value.code == 422 and "metadata.labels" in invalid.value.message
    spec = copy.deepcopy(SPEC)
    spec["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(ApiError) as undecodable:
        store.create(pods, _pod("three", spec), "default", manager="kubectl", field_validation=FieldValidation("Warn"))
    assert undecodable.value.code == 400 and "quantities must match" in undecodable.value.message
    strict = FieldValidation("Strict")
    spec = copy.deepcopy(SPEC)
    spec["containers"][0]["colour"] = "red"
    with pytest.raises(ApiError) as unknown:
        store.create(pods, _pod("four", spec), "default", manager="kubectl", field_validation=strict)
    assert unknown.value.code == 400 and 'unknown field "spec.containers[0].colour"' in unknown.value.message
    warned = FieldValidation("Warn")
    created = store.create(pods, _pod("five", spec), "default", manager="kubectl", field_validation=warned)
    again = FieldValidation("Warn")
    store.create(pods, _pod("six", spec), "default", manager="kubectl", field_validation=again)
    assert warned.warnings == again.warnings == ['unknown field "spec.containers[0].colour"']
    assert "colour" not in created["spec"]["containers"][0]


@pytest.mark.parametrize("raw", [b'{"a": NaN}', b'{"a": 1180591620717411303424}',
                                 b'[9223372036854775808, -9223372036854775809]', b'[1e400, 0.1, -0]',
                                 b'[1234567890, 1234567890]', b'{"a": "\\ud800"}', b'\xef\xbb\xbf{"a": 1}',
                                 b'{"a": 1.5e3, "a": [true, null]}'])
def test_request_bodies_decode_as_json_loads_decodes_them(raw: bytes) -> None:
    assert repr(messages.loads(raw)) == repr(json.loads(raw))


@pytest.mark.parametrize("raw", [b'{"a": 1', b"[1,]", b'{"a": 1} x'])
def test_malformed_bodies_get_json_loads_message(raw: bytes) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(raw)
    with pytest.raises(json.JSONDecodeError) as error:
        messages.loads(raw)
    assert str(error.value) == str(expected.value)


def test_an_update_checks_the_labels_it_changes() -> None:
    store = Store(seed=1)
    pods = store.resource_type("pods")
    stored = store.create(pods, _pod("labelled", labels={"app": "a"}), "default")
    kept = store.update(pods, {**stored, "status": {**stored["status"], "phase": "Running"}}, "status")
    assert kept["metadata"]["labels"] == {"app": "a"}
    for labels, code in (({"app": 1}, 400), ({"app": "has space"}, 422)):
        with pytest.raises(ApiError) as refused:
            store.update(pods, {**kept, "metadata": {**kept["metadata"], "labels": labels}})
        assert refused.value.code == code and "labels" in refused.value.message


@pytest.mark.parametrize("action", [None, "Binding"])
def test_a_recorded_event_is_the_event_create_stores(action: str | None) -> None:
    """record_event stores its Event without create's checks and defaults: the object, its key order and what the
    store's listeners see must be what create makes of the same body."""
    stores = [Store(seed=1, clock=lambda: 1_700_000_000.25) for _ in range(2)]
    seen: list[list[Any]] = [[], []]
    for store, events in zip(stores, seen, strict=True):
        store.add_listener(lambda *args, events=events: events.append(args[:2] + (json.dumps(args[2]),)))
    pods = [store.create(store.resource_type("pods"), _pod("p", labels={"app": "a"}), "default") for store in stores]
    recorded = stores[0].record_event(pods[0], "Scheduled", "assigned", source="sched", action=action)
    assert recorded is not None
    body = {key: value for key, value in recorded.items() if key not in ("kind", "apiVersion")}
    body["metadata"] = {key: recorded["metadata"][key] for key in ("name", "namespace")}
    created = stores[1].create(stores[1].resource_type("events"), copy.deepcopy(body), "default")
    assert json.dumps(recorded) == json.dumps(created)
    assert seen[0] == seen[1]
    events = stores[0].resource_type("events")
    assert stores[0].to_json(events, recorded) == stores[1].to_json(events, created)


def test_no_event_is_recorded_in_a_terminating_namespace() -> None:
    store = Store(seed=1)
    pod = store.create(store.resource_type("pods"), _pod("p"), "default")
    store.create(store.resource_type("namespaces"), {"metadata": {"name": "gone"}})
    store.delete(store.resource_type("namespaces"), None, "gone")
    assert store.record_event({**pod, "metadata": {**pod["metadata"], "namespace": "gone"}}, "R", "m") is None
    assert store.record_event({**pod, "metadata": {**pod["metadata"], "namespace": "absent"}}, "R", "m") is None
    assert store.record_event(pod, "R", "m") is not None
