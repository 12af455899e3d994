"""The pod subresources a kubelet serves, as the API answers them: ``pods/log`` (``serve_log``: the current or previous
run of a container, ``follow`` until that container instance ends) and the streams ``pods/exec``, ``pods/attach`` and
``pods/portforward`` (``serve_stream``: the container is checked here, the stream itself is ``streams/``'s)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.resources import ResourceType
from pytest_topsail.sim.node.podlogs import LogOptions
from pytest_topsail.sim.registry.store import Store
from pytest_topsail.sim.streams import podexec, portforward

LOG_POLL_SECONDS = 0.1


async def serve_log(store: Store, request: web.Request, rtype: ResourceType, namespace: str,
                    name: str) -> web.StreamResponse:
    pod = store.get(rtype, namespace, name)
    container = log_container(pod, request.query.get("container"))
    options = LogOptions.from_query(request.query, name, time.time())
    if options.previous:  # the run lastState.terminated names, as the kubelet: in back-off, the one just ended
        status = _container_status(pod, container)
        ended = (status.get("lastState") or {}).get("terminated")
        waiting = "waiting" in (status.get("state") or {})
        run = store.log_run(namespace, name, container, previous=not waiting) if ended else None
        if run is None:
            raise apierror.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
        return web.Response(text=options.render(run.lines), content_type="text/plain")
    _check_container_started(pod, container)
    run = store.log_run(namespace, name, container)
    lines = run.lines if run is not None else []
    text = options.render(lines)
    if request.query.get("follow") != "true":
        return web.Response(text=text, content_type="text/plain")
    budget = None if options.limit_bytes is None else options.limit_bytes - len(text.encode())
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(text.encode())
    position = run.end if run is not None else 0
    try:
        while budget is None or budget > 0:
            current = store.find(rtype, namespace, name)
            run = store.log_run(namespace, name, container)
            if run is not None and run.end > position:
                chunk = "".join(options.format(entry) for entry in run.since(position)).encode()
                position = run.end
                if budget is not None:
                    chunk, budget = chunk[:budget], budget - len(chunk)
                await response.write(chunk)
            if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"] or \
                    _container_terminated(current, container) or \
                    _restart_count(current, container) != _restart_count(pod, container):
                break  # the followed container instance is gone
            await asyncio.sleep(LOG_POLL_SECONDS)
        await response.write_eof()
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response


async def serve_stream(store: Store, request: web.Request, rtype: ResourceType, subresource: str, namespace: str,
                       name: str) -> web.StreamResponse:
    """pods/exec, pods/attach, pods/portforward: WebSocket streams served by podexec and portforward."""
    if request.method not in ("GET", "POST"):
        raise apierror.method_not_allowed(f"pods/{subresource} supports GET and POST")
    pod = store.get(rtype, namespace, name)
    if subresource == "portforward":
        return await portforward.serve(request, pod)
    container = log_container(pod, request.query.get("container"))
    if subresource == "attach":
        raise apierror.bad_request("the simulated cluster does not support pods/attach: a simulated container "
                                   "has no process to attach to (kubectl logs -f follows its output)")
    _check_container_started(pod, container)
    if _container_terminated(pod, container):
        raise apierror.bad_request(f'container "{container}" in pod "{pod["metadata"]["name"]}" is not '
                                   f"running: cannot exec into a container that has terminated")
    return await podexec.serve(request, store, pod, container)


def log_container(pod: dict[str, Any], wanted: str | None) -> str:
    """The container a log or exec request names (the only one when it names none); 400 otherwise."""
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    names += [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []]
    pod_name = pod["metadata"]["name"]
    if wanted:
        if wanted not in names:
            raise apierror.bad_request(f"container {wanted} is not valid for pod {pod_name}")
        return wanted
    if len(names) == 1 or (names and len((pod.get("spec") or {}).get("containers") or []) == 1):
        return names[0]
    raise apierror.bad_request(f"a container name must be specified for pod {pod_name}, choose one of: "
                               f"[{' '.join(names)}]")


def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    status = pod.get("status") or {}
    entries = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return next((entry for entry in entries if entry.get("name") == container), {})


def _check_container_started(pod: dict[str, Any], container: str) -> None:
    entry = _container_status(pod, container)
    state = entry.get("state") or {}
    if "running" in state or "terminated" in state or (entry.get("lastState") or {}).get("terminated"):
        return
    reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
    raise apierror.bad_request(f'container "{container}" in pod "{pod["metadata"]["name"]}" is waiting to '
                               f"start: {reason}")


def _restart_count(pod: dict[str, Any], container: str) -> int:
    for entry in (pod.get("status") or {}).get("containerStatuses") or []:
        if entry.get("name") == container:
            return int(entry.get("restartCount") or 0)
    return 0


def _container_terminated(pod: dict[str, Any], container: str) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    for entry in status.get("containerStatuses") or []:
        if entry.get("name") == container:
            return "terminated" in (entry.get("state") or {})
    return False
