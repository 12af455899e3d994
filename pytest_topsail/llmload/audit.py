"""The validity audit of a load point: whether the figures its client measured can be trusted. Each reason found
makes the point's client-measured KPIs (latencies, throughput, rates, goodput) ``ignored`` with that reason, never
judged (suites/llm_load/kpis.py), and is shown as a problem of the item.

- **client saturated**: the load client used more CPU than ``client_max_cpu_share`` or its event loop lagged more
  than ``client_max_loop_lag_ms`` (``metrics.client_summary``'s warning): its clock measured itself.
- **not at steady state**: the successful requests ending in the first and in the second half of the measurement
  window differ by more than ``STEADY_TOLERANCE`` of the larger count, plus what chance and the users' lockstep
  explain (3 x the square root of the total, for Poisson noise; ``concurrency``, a closed loop's users finishing
  together); judged from ``STEADY_MIN_REQUESTS`` requests on (a few requests say nothing about a trend).
- **errors**: more than ``MAX_ERROR_SHARE`` of the measured requests failed (an item fails beyond
  ``max_failure_rate``, 0 by default; a suite allowing more still judges nothing of such a point): its latencies are
  those of the requests that got through.
- **server and client disagree on TTFT**: the server's mean time to first token over the point (its /metrics
  histogram, server_metrics.py) and the client's differ by more than ``TTFT_TOLERANCE_MS`` and
  ``TTFT_TOLERANCE`` of the client's. The server's clock starts when the request arrives, the client's when it sends
  it: the gap is the network and the client's own delay, which neither a loaded client nor a wrong window should make
  large. Server figures of other windows (warm-up and drain requests included) are close enough for that bound.
Too few samples for a tail is judged per KPI (``min_samples`` of the suite's KPI declarations).
"""

from __future__ import annotations

import math
from typing import Any

STEADY_TOLERANCE = 0.3
STEADY_MIN_REQUESTS = 40
TTFT_TOLERANCE_MS = 10.0
TTFT_TOLERANCE = 0.25
MAX_ERROR_SHARE = 0.05


def audit_point(summary: dict[str, Any], server: dict[str, Any] | None = None) -> list[str]:
    """Why the point's client-measured figures cannot be trusted (empty: they can)."""
    reasons = []
    warning = (summary.get("client") or {}).get("warning")
    if warning:
        reasons.append(warning)
    failed = summary.get("failure_rate") or 0.0
    if failed > MAX_ERROR_SHARE:
        reasons.append(f"{failed:.0%} of the measured requests failed (> {MAX_ERROR_SHARE:.0%}): the latencies are "
                       "those of the requests that got through")
    steady = steady_state(summary)
    if steady:
        reasons.append(steady)
    agreement = ttft_agreement(summary, server or {})
    if agreement:
        reasons.append(agreement)
    return reasons


def steady_state(summary: dict[str, Any]) -> str | None:
    """Why the point was not at steady state over its window, or None."""
    halves = summary.get("window_halves")
    if not halves or sum(halves) < STEADY_MIN_REQUESTS:
        return None
    first, second = halves
    slack = STEADY_TOLERANCE * max(first, second) + 3.0 * math.sqrt(first + second) + (summary.get("concurrency") or 0)
    if abs(first - second) <= slack:
        return None
    return (f"not at steady state: {first} requests ended in the first half of the measurement window, {second} in "
            f"the second (more apart than {STEADY_TOLERANCE:.0%}, chance and the users' lockstep explain); a longer "
            "warm-up (warmup_s, warmup_requests) or window")


def ttft_agreement(summary: dict[str, Any], server: dict[str, Any]) -> str | None:
    """Why the server's and the client's TTFT disagree, or None (also when either is unknown)."""
    client = (summary.get("stats", {}).get("ttft_ms") or {}).get("mean")
    served = server.get("ttft_mean_ms")
    if client is None or served is None:
        return None
    allowed = max(TTFT_TOLERANCE_MS, TTFT_TOLERANCE * client)
    if abs(client - served) <= allowed:
        return None
    return (f"server and client disagree on TTFT: mean {served:.1f} ms on the server (its /metrics), {client:.1f} ms "
            f"on the client, more than {allowed:.1f} ms apart (the larger of {TTFT_TOLERANCE_MS:g} ms and "
            f"{TTFT_TOLERANCE:.0%} of the client's)")
