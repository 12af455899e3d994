"""The load loops (asyncio, one event loop, one backend connection pool for the whole sweep).

- closed loop (``mode: concurrency``): ``concurrency`` users, each sending its next request as soon as the previous
  one ended; the number of requests in flight stays constant.
- conversations (multi-turn prompts, multi_turn.py): in the closed loop each user holds one conversation at a
  time, sending its turns in order, ``think_time_s`` apart.
- open loop (``mode: constant`` or ``poisson``): requests due at fixed ``1/rate`` intervals or at exponentially
  distributed intervals of mean ``1/rate`` (seeded); the schedule is absolute, so a late request does not push the
  ones after it; ``concurrency``, when given, caps the requests in flight (a capped request starts late, which the
  achieved rate shows).
A point's measurement ends at ``warmup_s + duration_s`` and/or after ``requests`` measured requests, whichever comes
first. Ramp-up: requests started during the first ``warmup_s`` seconds, and the first ``warmup_requests`` requests,
are recorded with ``warmup: true``; cool-down: the point goes on issuing for ``cooldown_s`` seconds and/or
``cooldown_requests`` requests after its measurement ended, recorded with ``cooldown: true`` (the load stays steady
until the window's end). Both are left out of the metrics, their records kept.
Requests still running when issuing stopped get ``drain_timeout_s`` to finish, then are cancelled (status
``cancelled``); every request has its own ``timeout_s`` (status ``timeout``).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.backends import Backend, BackendError
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.multi_turn import conversations_of
from pytest_topsail.llmload.records import OK, RequestRecord
from pytest_topsail.waiting import Deadline

MODES = ("concurrency", "constant", "poisson")


@dataclass(frozen=True)
class LoadPoint:
    mode: str = "concurrency"
    concurrency: int | None = None
    rate: float | None = None
    duration_s: float | None = None
    requests: int | None = None
    warmup_s: float = 0.0
    warmup_requests: int = 0  # ramp-up: the first requests issued are warm-up too
    cooldown_s: float = 0.0  # cool-down: issuing goes on this long after the measurement ended
    cooldown_requests: int = 0  # ... and/or for this many requests
    timeout_s: float = 300.0
    drain_timeout_s: float = 60.0
    seed: int = 0
    max_errors: int | None = None  # stop rule: the point stops issuing once this many requests failed
    max_error_rate: float | None = None  # stop rule: ... once this share of the ended requests failed
    error_rate_min_requests: int = 20  # ... counted from this many ended requests on
    client_max_cpu_share: float = 0.9  # client saturation warning: the client process's CPU over the point's time
    client_max_loop_lag_ms: float = 50.0  # ... or its event loop's p99 scheduling lag
    think_time_s: float = 0.0  # conversations: a user's pause between an answer and its next turn

    def stop_rule(self, ended: int, errors: int) -> str | None:
        """Why the point must stop issuing after ``ended`` requests of which ``errors`` failed (None: go on)."""
        if self.max_errors is not None and errors >= self.max_errors:
            return f"stop rule: {errors} failed requests reached max_errors={self.max_errors}"
        if (self.max_error_rate is not None and ended >= self.error_rate_min_requests
                and errors / ended > self.max_error_rate):
            return (f"stop rule: {errors} of {ended} requests failed ({errors / ended:.0%}) > "
                    f"max_error_rate={self.max_error_rate:g}")
        return None

    def check(self, where: str) -> None:
        """Raise a TopsailError naming ``where`` when the point cannot run."""
        problems = []
        if self.mode not in MODES:
            problems.append(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode == "concurrency" and not (self.concurrency and self.concurrency >= 1):
            problems.append("mode concurrency needs concurrency >= 1")
        if self.mode != "concurrency" and not (self.rate and self.rate > 0):
            problems.append(f"mode {self.mode} needs rate > 0 (requests/s)")
        if self.duration_s is None and self.requests is None:
            problems.append("give duration_s and/or requests (when to stop)")
        if self.duration_s is not None and self.duration_s <= 0:
            problems.append(f"duration_s must be > 0, got {self.duration_s}")
        if self.requests is not None and self.requests < 1:
            problems.append(f"requests must be >= 1, got {self.requests}")
        for name in ("warmup_s", "warmup_requests", "cooldown_s", "cooldown_requests", "timeout_s", "drain_timeout_s",
                     "think_time_s"):
            if getattr(self, name) < 0 or (name == "timeout_s" and self.timeout_s == 0):
                problems.append(f"{name} must be {'>' if name == 'timeout_s' else '>='} 0")
        if self.max_errors is not None and self.max_errors < 1:
            problems.append(f"max_errors must be >= 1, got {self.max_errors}")
        if self.max_error_rate is not None and not 0 <= self.max_error_rate < 1:
            problems.append(f"max_error_rate must be in [0, 1), got {self.max_error_rate}")
        if problems:
            raise TopsailError(f"{where}: " + "; ".join(problems))

    @property
    def label(self) -> str:
        if self.mode == "concurrency":
            return f"concurrency={self.concurrency}"
        return f"{self.mode} rate={self.rate or 0:g}/s" + (f" max={self.concurrency}" if self.concurrency else "")


@dataclass
class PointResult:
    """One load point's records and timing (seconds relative to the point's start ``t0``)."""

    index: int
    point: LoadPoint
    started_epoch: float
    measure_start: float
    stop: float  # when issuing stopped (the deadline, or when the request count was reached; then the cool-down)
    ended: float  # when the last request ended (or was cancelled)
    records: list[RequestRecord] = field(default_factory=list, repr=False)  # repr: asyncio.run reprs its result
    stopped_by: str | None = None  # the stop rule that ended the point early
    measure_end: float | None = None  # when the measurement ended (the cool-down began); None: at ``stop``
    client: dict[str, Any] = field(default_factory=dict)  # the client's own load (ClientWatch.result)


class PointRun:
    """The state of one point while it runs."""

    def __init__(self, backend: Backend, prompts: Sequence[Prompt], point: LoadPoint, index: int,
                 on_record: Callable[[RequestRecord, float], None] | None = None) -> None:
        if not prompts:
            raise TopsailError("load test: the dataset holds no prompt")
        self.backend, self.prompts, self.point, self.index = backend, prompts, point, index
        self.t0 = time.perf_counter()
        self.measure_start = self.t0 + point.warmup_s
        self.deadline = self.measure_start + point.duration_s if point.duration_s is not None else None
        self.next_index = itertools.count()
        self.issued, self.measured, self.cooled = 0, 0, 0
        self.measure_end: float | None = None
        self.stop: float | None = None
        self.records: list[RequestRecord] = []
        self.on_record = on_record  # called with each ended record and t0 (a generator pod saves it at once)
        self.ended_count, self.errors = 0, 0
        self.stopped_by: str | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.conversations = conversations_of(prompts)
        if self.conversations is not None and point.mode != "concurrency":
            raise TopsailError(f"load point {point.label}: conversations (multi-turn prompts) run in a closed loop "
                               "(mode concurrency): each user holds one conversation at a time")
        self.next_conversation = itertools.count()

    def issuing(self, now: float) -> bool:
        """Whether a request may still be issued at ``now``: measuring, then cooling down (records when the
        measurement and the issuing stopped)."""
        point = self.point
        if self.measure_end is None:
            over = (self.deadline is not None and now >= self.deadline) or (
                point.requests is not None and self.measured >= point.requests) or self.stopped_by is not None
            if not over:
                return True
            self.measure_end = min(now, self.deadline) if self.deadline is not None else now
        cooling = self.stopped_by is None and (
            now < self.measure_end + point.cooldown_s or self.cooled < point.cooldown_requests)
        if not cooling and self.stop is None:
            self.stop = self.measure_end if not (point.cooldown_s or point.cooldown_requests) else now
        return cooling

    def new_record(self, when: float, **fields: int | float | None) -> RequestRecord:
        """The record of a request issued at ``when``: warm-up, measured, or cool-down."""
        warmup = when < self.measure_start or self.issued < self.point.warmup_requests
        cooldown = self.measure_end is not None
        record = RequestRecord(point=self.index, index=next(self.next_index), stream=self.backend.stream,
                               warmup=warmup, cooldown=cooldown, **fields)  # type: ignore[arg-type]
        self.issued += 1
        if cooldown:
            self.cooled += 1
        elif not warmup:
            if not self.measured and self.point.warmup_requests:  # the ramp-up ends with its last request
                self.measure_start = max(self.measure_start, when)
                if self.point.duration_s is not None:
                    self.deadline = self.measure_start + self.point.duration_s
            self.measured += 1
        return record

    async def send(self, record: RequestRecord, prompt: Prompt | None = None) -> None:
        """Send ``prompt`` (default: the dataset's prompts in turn) as ``record``."""
        prompt = prompt or self.prompts[record.index % len(self.prompts)]
        record.start = time.perf_counter()
        try:
            async with asyncio.timeout(self.point.timeout_s):
                await self.backend.send(prompt, record)
        except BackendError as error:
            record.fail(error.status, error.message)
        except TimeoutError:
            record.fail("timeout", f"no complete answer within timeout_s={self.point.timeout_s:g}")
        except asyncio.CancelledError:
            record.fail("cancelled", "still running drain_timeout_s after the load point stopped issuing")
            raise
        except Exception as error:  # a malformed answer is a failed request, not a crashed load test
            record.fail(type(error).__name__, str(error) or type(error).__name__)
        finally:
            if not record.end:  # a backend reading in a thread times the end there (the loop wakes later)
                record.end = time.perf_counter()
            self.records.append(record)
            self.count(record)
            if self.on_record is not None:
                self.on_record(record, self.t0)

    def count(self, record: RequestRecord) -> None:
        """Apply the stop rules: once one trips, no request is issued and those running get drain_timeout_s."""
        self.ended_count += 1
        self.errors += record.status != OK
        if self.stopped_by is None and (reason := self.point.stop_rule(self.ended_count, self.errors)):
            self.stopped_by = reason
            self.issuing(time.perf_counter())
            asyncio.get_running_loop().call_later(self.point.drain_timeout_s, self.cancel_running)

    def cancel_running(self) -> None:
        for task in self.tasks:
            task.cancel()

    async def user(self, number: int) -> None:
        if self.conversations is not None:
            await self.converse(number, self.conversations)
            return
        while self.issuing(now := time.perf_counter()):
            await self.send(self.new_record(now, user=number))

    async def converse(self, number: int, conversations: list[list[Prompt]]) -> None:
        """A user holding one conversation after the other (in turn across users), its turns in order,
        ``think_time_s`` between an answer and the next turn; a failed turn ends its conversation."""
        while self.issuing(time.perf_counter()):
            turns = conversations[next(self.next_conversation) % len(conversations)]
            for position, prompt in enumerate(turns):
                if position and self.point.think_time_s:
                    await asyncio.sleep(self.point.think_time_s)
                if not self.issuing(now := time.perf_counter()):
                    return
                record = self.new_record(now, user=number, turn=prompt.turn)
                await self.send(record, prompt)
                if record.status != OK:
                    break

    async def closed_loop(self) -> None:
        self.tasks = [asyncio.create_task(self.user(number)) for number in range(self.point.concurrency or 1)]
        await self.drain(self.tasks)

    async def open_loop(self) -> None:
        rng = random.Random(self.point.seed)
        limit = asyncio.Semaphore(self.point.concurrency) if self.point.concurrency else None
        tasks = self.tasks
        rate = self.point.rate or 1.0
        due, sent = self.t0, 0
        while self.issuing(due):
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            record = self.new_record(due, scheduled=due)
            tasks.append(asyncio.create_task(self.limited(record, limit)))
            sent += 1
            due = due + rng.expovariate(rate) if self.point.mode == "poisson" else self.t0 + sent / rate
        await self.drain(tasks)

    async def limited(self, record: RequestRecord, limit: asyncio.Semaphore | None) -> None:
        if limit is None:
            await self.send(record)
            return
        async with limit:
            await self.send(record)

    async def drain(self, tasks: list[asyncio.Task[None]]) -> None:
        """Wait for the tasks: until issuing stopped (or the deadline and cool-down passed) plus drain_timeout_s,
        then cancel what is left. The limit is looked at again each second: a ramp-up by request count moves the
        deadline after the users started."""
        pending: set[asyncio.Task[None]] = set(tasks)
        while pending:
            limit = Deadline.until(self.drain_limit(), clock=time.perf_counter)
            _, pending = await asyncio.wait(pending, timeout=None if limit.timeout is None else min(limit.left(), 1.0))
            if limit.expired():
                break
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def drain_limit(self) -> float | None:
        """The perf_counter instant when the requests still running are cancelled (None: each has timeout_s)."""
        if self.stop is not None:
            return self.stop + self.point.drain_timeout_s
        if self.deadline is None or self.point.cooldown_requests:
            return None
        return self.deadline + self.point.cooldown_s + self.point.drain_timeout_s

    async def run(self) -> PointResult:
        started_epoch = time.time()
        watch = ClientWatch()
        watcher = asyncio.create_task(watch.run())
        try:
            if self.point.mode == "concurrency":
                await self.closed_loop()
            else:
                await self.open_loop()
        finally:
            watcher.cancel()
        ended = time.perf_counter()
        for record in self.records:
            record.relative_to(self.t0)
        self.records.sort(key=lambda record: record.index)
        stop = (self.stop or ended) - self.t0
        return PointResult(index=self.index, point=self.point, started_epoch=started_epoch,
                           measure_start=self.measure_start - self.t0, stop=stop,
                           ended=ended - self.t0, records=self.records, stopped_by=self.stopped_by,
                           measure_end=stop if self.measure_end is None else min(self.measure_end - self.t0, stop),
                           client=watch.result())


class ClientWatch:
    """How loaded the client itself was during a point (is the client, not the server, the bottleneck?): its
    process's CPU time over the wall time (all threads: 1.0 is one core busy), and the event loop's scheduling lag
    (how late a ``sleep(TICK_S)`` wakes up: the loop was busy running other callbacks)."""

    TICK_S = 0.05

    def __init__(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        self.lags: list[float] = []

    async def run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.TICK_S)
            self.lags.append(max(0.0, time.perf_counter() - before - self.TICK_S))

    def result(self) -> dict[str, Any]:
        wall = max(time.perf_counter() - self.wall0, 1e-9)
        lags = sorted(self.lags)
        return {"cpu_s": time.process_time() - self.cpu0, "wall_s": wall,
                "cpu_share": (time.process_time() - self.cpu0) / wall,
                "loop_lag_p99_ms": 1000.0 * lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else 0.0,
                "loop_lag_max_ms": 1000.0 * lags[-1] if lags else 0.0}


NextPoint = Callable[[list[PointResult]], LoadPoint | None]  # the points run so far -> the next one (None: done)


async def run_sweep(backend: Backend, prompts: Sequence[Prompt], points: Sequence[LoadPoint] | NextPoint,
                    on_point: Callable[[PointResult], None] | None = None,
                    on_record: Callable[[RequestRecord, float], None] | None = None) -> list[PointResult]:
    """Run the points one after the other on one backend (opened once, closed at the end, also on failure);
    ``points`` may be a function choosing each point from the results so far (``AutoSweep``)."""
    if not callable(points):
        for number, given in enumerate(points):
            given.check(f"load point {number} ({given.label})")
        fixed = list(points)
        points = lambda done: fixed[len(done)] if len(done) < len(fixed) else None  # noqa: E731
    results: list[PointResult] = []
    await backend.open()
    try:
        while (next_point := points(results)) is not None:
            next_point.check(f"load point {len(results)} ({next_point.label})")
            result = await PointRun(backend, prompts, next_point, len(results), on_record).run()
            results.append(result)
            if on_point is not None:
                on_point(result)
    finally:
        await backend.close()
    return results


def completed_rate(result: PointResult) -> float:
    """Successful requests that ended inside the point's window, per second (the summary's requests_per_s)."""
    end = result.stop if result.measure_end is None else result.measure_end
    window = max(end - result.measure_start, 1e-9)
    return sum(1 for r in result.records if r.status == OK and result.measure_start <= r.end <= end) / window


@dataclass(frozen=True)
class AutoSweep:
    """guidellm's sweep: a synchronous point (one user), a max-throughput point (``max_concurrency`` users), then
    ``rates`` constant-rate points evenly between the two completed rates; every point as ``base`` otherwise."""

    base: LoadPoint
    rates: int = 4
    max_concurrency: int = 256

    def __call__(self, done: list[PointResult]) -> LoadPoint | None:
        from dataclasses import replace

        if not done:
            return replace(self.base, mode="concurrency", concurrency=1, rate=None)
        if len(done) == 1:
            return replace(self.base, mode="concurrency", concurrency=self.max_concurrency, rate=None)
        if len(done) >= 2 + self.rates or done[-1].stopped_by:
            return None
        low, high = completed_rate(done[0]), completed_rate(done[1])
        if self.ended_early([low, high]):
            return None
        step = len(done) - 1
        return replace(self.base, mode="constant", concurrency=None,
                       rate=low + step * (high - low) / (self.rates + 1))

    def ended_early(self, requests_per_s: Sequence[float]) -> str | None:
        """Why a sweep of two points measured no rate points between them (None: it goes on or went on): the
        max-throughput point completed no more requests per second than one user, so there is no headroom to
        divide. ``requests_per_s``: the points' completed rates (their summaries' requests_per_s)."""
        if len(requests_per_s) != 2 or requests_per_s[1] > requests_per_s[0]:
            return None
        return (f"automatic sweep ended after 2 points: {self.max_concurrency} users completed "
                f"{requests_per_s[1]:.2f} requests/s, no more than one user's {requests_per_s[0]:.2f}/s, so no "
                f"constant-rate points were measured between them")
