"""Watch through the official client: order, resume from a resourceVersion, 410 Gone, timeoutSeconds, selectors."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

WATCH_LOG_SIZE = 30


@pytest.fixture(scope="module")
def watch_sim(tmp_path_factory: pytest.TempPathFactory, start_sim: Any, no_controllers: list[str]) -> Iterator[Any]:
    yield from start_sim(tmp_path_factory, "watch-sim", controllers=no_controllers, watch_log_size=WATCH_LOG_SIZE)


@pytest.fixture(scope="module")
def core(watch_sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(watch_sim.api_client())


@pytest.fixture
def namespace(core: client.CoreV1Api) -> str:
    name = f"w-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def _events(core: client.CoreV1Api, namespace: str, count: int, **kwargs: Any) -> list[tuple[str, str, str]]:
    """The first ``count`` events as (type, name, data value); the stream is bounded by timeoutSeconds."""
    seen: list[tuple[str, str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_config_map, namespace, timeout_seconds=10, **kwargs):
        obj = event["object"]
        seen.append((event["type"], obj.metadata.name, (obj.data or {}).get("v", "")))
        if len(seen) == count:
            stream.stop()
    return seen


def test_events_arrive_in_commit_order(core: client.CoreV1Api, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version

    def mutate() -> None:
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}, "data": {"v": "1"}})
        core.create_namespaced_config_map(namespace, {"metadata": {"name": "b"}, "data": {"v": "1"}})
        core.patch_namespaced_config_map("a", namespace, {"data": {"v": "2"}})
        core.delete_namespaced_config_map("b", namespace)

    writer = threading.Thread(target=mutate)
    writer.start()
    try:
        seen = _events(core, namespace, 4, resource_version=start)
    finally:
        writer.join(30)
    assert seen == [("ADDED", "a", "1"), ("ADDED", "b", "1"), ("MODIFIED", "a", "2"), ("DELETED", "b", "1")]


def test_watch_without_resource_version_starts_with_the_current_objects(core: client.CoreV1Api,
                                                                        namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "existing"}, "data": {"v": "0"}})
    assert _events(core, namespace, 1) == [("ADDED", "existing", "0")]


def test_resume_from_a_resource_version_replays_what_happened_after_it(core: client.CoreV1Api,
                                                                       namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, {"metadata": {"name": "r"}, "data": {"v": "1"}})
    core.patch_namespaced_config_map("r", namespace, {"data": {"v": "2"}})
    core.patch_namespaced_config_map("r", namespace, {"data": {"v": "3"}})
    seen = _events(core, namespace, 2, resource_version=first.metadata.resource_version)
    assert seen == [("MODIFIED", "r", "2"), ("MODIFIED", "r", "3")]


def test_too_old_resource_version_is_410_gone(core: client.CoreV1Api, namespace: str) -> None:
    old = core.create_namespaced_config_map(namespace, {"metadata": {"name": "old"}, "data": {"v": "0"}})
    for value in range(WATCH_LOG_SIZE + 5):
        core.patch_namespaced_config_map("old", namespace, {"data": {"v": str(value)}})
    with pytest.raises(ApiException) as gone:
        _events(core, namespace, 1, resource_version=old.metadata.resource_version)
    assert gone.value.status == 410


def test_timeout_seconds_ends_a_quiet_watch(core: client.CoreV1Api, namespace: str) -> None:
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=1,
                                       resource_version=core.list_namespaced_config_map(namespace).metadata
                                       .resource_version))
    assert events == []
    assert time.monotonic() - started < 15  # ended by the server, not by a hang


def test_label_selector_filters_watch_events(core: client.CoreV1Api, namespace: str) -> None:
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "no", "labels": {"pick": "no"}}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "yes", "labels": {"pick": "yes"}},
                                                  "data": {"v": "y"}})
    assert _events(core, namespace, 1, resource_version=start, label_selector="pick=yes") == [("ADDED", "yes", "y")]


def test_watch_across_namespaces_sees_only_its_resource(core: client.CoreV1Api, namespace: str) -> None:
    start = core.list_config_map_for_all_namespaces().metadata.resource_version
    core.create_namespaced_secret(namespace, {"metadata": {"name": "not-a-configmap"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm-all"}, "data": {"v": "x"}})
    stream = watch.Watch()
    seen = []
    for event in stream.stream(core.list_config_map_for_all_namespaces, resource_version=start, timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.namespace, event["object"].metadata.name))
        stream.stop()
    assert seen == [("ADDED", namespace, "cm-all")]


def test_bookmark_at_the_end_of_a_watch_that_asked_for_bookmarks(watch_sim: Any, core: client.CoreV1Api,
                                                                  namespace: str) -> None:
    import json

    core.create_namespaced_config_map(namespace, {"metadata": {"name": "before"}})
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_secret(namespace, {"metadata": {"name": "unrelated"}})
    path = (f"/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=1&allowWatchBookmarks=true"
            f"&resourceVersion={start}")
    events = [json.loads(line) for line in watch_sim.raw("GET", path).text.splitlines()]
    assert [e["type"] for e in events] == ["BOOKMARK"]
    assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(start)
    plain = watch_sim.raw("GET", path.replace("&allowWatchBookmarks=true", "")).text
    assert plain == ""
