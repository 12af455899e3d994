"""Small shared machinery of the simulator's controllers.

A controller reacts to store events, remembers which objects need work in a de-duplicated queue, and works through
that queue in an asyncio task of the server's loop. Delays come from the profile through `Controller.delay(stage,
*key)`: the jitter is drawn from a hash of the seed and the object's key, so a given object gets the same delays in
every run with the same seed, whatever order the events arrive in.

Listener callbacks run synchronously inside the store's commit: they must only look at the object and enqueue work,
never write to the store. All writes happen in `reconcile`, `on_start` or timer callbacks (via `enqueue`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_topsail.conditions import find_condition
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.machinery.times import format_micro_time, format_time

if TYPE_CHECKING:
    from pydantic import BaseModel

    from pytest_topsail.sim.controllers.profile import Profile, Stage
    from pytest_topsail.sim.controllers.storeapi import Store

log = logging.getLogger(__name__)

# How many queued keys a controller handles before it lets other tasks (the API server) run. Small: on a real
# cluster the controllers run beside the apiserver, not in its way; a burst of 1,000 Job creates through the client
# is answered ~25% sooner with 10 than with 200 (the controllers catch up right after).
BATCH = 10


def now_rfc3339() -> str:
    """Timestamps written by controllers: RFC 3339 UTC with microseconds (parsed by kubectl and the client)."""
    return format_micro_time(time.time())


def now_seconds() -> str:
    """RFC 3339 UTC to the second, as the apiserver writes metav1.Time fields such as lastTransitionTime."""
    return format_time(time.time())


def stable_fraction(seed: int, *parts: object) -> float:
    """A number in [0, 1) that depends only on the seed and the parts."""
    text = "\x1f".join([str(seed), *(str(p) for p in parts)]).encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


condition = find_condition  # the one lookup (pytest_topsail.conditions), by the name the controllers use


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """A copy of `conditions` with `new` replacing the one of the same type; the transition time is kept when
    the status does not change."""
    result = []
    replaced = False
    for cond in conditions:
        if cond.get("type") == new["type"]:
            merged = dict(new)
            if cond.get("status") == new.get("status") and cond.get("lastTransitionTime"):
                merged["lastTransitionTime"] = cond["lastTransitionTime"]
            result.append(merged)
            replaced = True
        else:
            result.append(cond)
    if not replaced:
        result.append(dict(new))
    return result


Handler = Callable[[str, dict[str, Any]], None]


class _Dispatch:
    """The one store listener of all controllers of a store: hands each event to the handlers registered for its
    resource type only, so that the cost of an event does not grow with the number of controllers."""

    def __init__(self) -> None:
        self.handlers: dict[tuple[str, str], list[Handler]] = {}

    def __call__(self, event_type: str, rtype: Any, obj: dict[str, Any]) -> None:
        for handler in self.handlers.get(rtype.key, ()):
            handler(event_type, obj)

    def add(self, key: tuple[str, str], handler: Handler) -> None:
        self.handlers[key] = [*self.handlers.get(key, ()), handler]  # copy on write: safe during a dispatch

    def remove(self, key: tuple[str, str], handler: Handler) -> None:
        remaining = [h for h in self.handlers.get(key, ()) if h is not handler]
        if remaining:
            self.handlers[key] = remaining
        else:
            self.handlers.pop(key, None)


_dispatchers: weakref.WeakKeyDictionary[Any, _Dispatch] = weakref.WeakKeyDictionary()


def _dispatch_for(store: Any) -> _Dispatch:
    dispatch = _dispatchers.get(store)
    if dispatch is None:
        dispatch = _dispatchers[store] = _Dispatch()
        store.add_listener(dispatch)
    return dispatch


class Controller:
    """Base class: subclasses set `name`, register watches in `on_start` and implement `reconcile(key)`.

    A plugin with settings sets `settings_model` (a pydantic model): `self.settings` is then the profile's
    `plugins.<name>` validated by it (defaults when absent); the profile checks it when it is built."""

    name: ClassVar[str] = "controller"
    settings_model: ClassVar[type[BaseModel] | None] = None

    def __init__(self, store: Store, profile: Profile) -> None:
        self.store = store
        self.profile = profile
        self.seed = profile.seed
        model = self.settings_model
        self.settings = model.model_validate(profile.plugins.get(self.name) or {}) if model is not None else None
        self._queue: deque[Hashable] = deque()
        self._queued: set[Hashable] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._handlers: list[tuple[tuple[str, str], Handler]] = []
        self._stopped = False

    # lifecycle -----------------------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"sim-{self.name}")
        await self.on_start()

    async def stop(self) -> None:
        self._stopped = True
        dispatch = _dispatchers.get(self.store)
        for key, handler in self._handlers:
            if dispatch is not None:
                dispatch.remove(key, handler)
        self._handlers.clear()
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def on_start(self) -> None:
        """Register watches, create initial objects."""

    async def reconcile(self, key: Hashable) -> None:
        """Bring the object named by `key` to its wanted state. Raise nothing a user did not cause."""

    # watching ------------------------------------------------------------------------------------------------------
    def watch(self, plural: str, group: str, handler: Handler) -> None:
        """Call `handler(event_type, obj)` for every committed change of one resource type (synchronously)."""
        self.watch_key((group, self.store.resource_type(plural, group).plural), handler)

    def watch_key(self, key: tuple[str, str], handler: Handler) -> None:
        """Like `watch`, by (group, plural), for a type that may only be registered later (by a CRD)."""

        def guarded(event_type: str, obj: dict[str, Any]) -> None:
            if not self._stopped:
                try:
                    handler(event_type, obj)
                except Exception:  # a bug in one controller must not break the store's commit
                    log.exception("sim %s: handling %s event failed", self.name, event_type)

        _dispatch_for(self.store).add(key, guarded)
        self._handlers.append((key, guarded))

    # work queue ----------------------------------------------------------------------------------------------------
    def enqueue(self, key: Hashable) -> None:
        if key not in self._queued and not self._stopped:
            self._queued.add(key)
            self._queue.append(key)
            self._wakeup.set()

    def enqueue_after(self, seconds: float, key: Hashable, timer_key: Hashable | None = None) -> None:
        """Enqueue `key` after `seconds`; a later call with the same timer key replaces the pending one."""
        self.call_later(seconds, timer_key if timer_key is not None else key, self.enqueue, key)

    def call_later(self, seconds: float, timer_key: Hashable, func: Callable[..., None], *args: Any) -> None:
        self.cancel_timer(timer_key)
        if self._stopped:
            return
        if seconds <= 0:
            func(*args)
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.pop(timer_key, None)
            func(*args)

        self._timers[timer_key] = loop.call_later(seconds, fire)

    def cancel_timer(self, timer_key: Hashable) -> None:
        handle = self._timers.pop(timer_key, None)
        if handle is not None:
            handle.cancel()

    def has_timer(self, timer_key: Hashable) -> bool:
        return timer_key in self._timers

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            handled = 0
            while self._queue:
                key = self._queue.popleft()
                self._queued.discard(key)
                await self._reconcile_safely(key)
                handled += 1
                if handled % BATCH == 0:
                    await asyncio.sleep(0)
            await self.after_batch()

    async def after_batch(self) -> None:
        """Called when the queue has been emptied (e.g. to retry work that waited for capacity)."""

    async def _reconcile_safely(self, key: Hashable) -> None:
        try:
            await self.reconcile(key)
        except ApiError as exc:
            if exc.code == 409:  # changed under our feet: look again with the new version
                self.enqueue(key)
            elif exc.code != 404:  # 404: deleted meanwhile, nothing left to do
                log.warning("sim %s: %s: %s", self.name, key, exc.message)
        except Exception:
            log.exception("sim %s: reconciling %s failed", self.name, key)

    # profile -------------------------------------------------------------------------------------------------------
    def delay(self, stage: Stage, *key: object) -> float:
        """Seconds to wait for `stage` of the object named by `key`: delay + seeded jitter."""
        seconds = stage.delay_ms / 1000.0
        if stage.jitter_ms:
            seconds += stable_fraction(self.seed, self.name, *key) * stage.jitter_ms / 1000.0
        return seconds

    def fraction(self, *key: object) -> float:
        return stable_fraction(self.seed, *key)
