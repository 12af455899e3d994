"""When and how long the Kubernetes layer retries a request (client-go's rules, bounded).

Retried, at most :data:`MAX_ATTEMPTS` times in all, with exponential backoff (0.2 s doubling, at most 3 s) or the
server's ``Retry-After`` (at most 5 s):
- 429 Too Many Requests and 503 Service Unavailable: any method (the API server answers them before doing anything:
  priority and fairness, a busy or starting server);
- 500, 502, 504: idempotent methods only (GET, HEAD, PUT, DELETE, OPTIONS): a POST or PATCH may have been applied;
- a connection refused (nothing was sent): any method; a connection reset or broken mid-request: idempotent methods.
Timeouts are not retried: the caller's timeout is the bound it asked for.

A create whose caller can tell a lost answer (``Kube.create(..., lost_answer_ok=True)``: the object's name is the
caller's own, so a 409 AlreadyExists on a later attempt means an earlier attempt got through) is retried like an
idempotent request: 500/502/504 and a connection lost mid-request too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import urllib3

MAX_ATTEMPTS = 5
FIRST_DELAY_S = 0.2
MAX_DELAY_S = 3.0
MAX_RETRY_AFTER_S = 5.0
ANY_METHOD_STATUSES = frozenset({429, 503})
IDEMPOTENT_STATUSES = frozenset({500, 502, 504})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = MAX_ATTEMPTS
    first_delay_s: float = FIRST_DELAY_S
    max_delay_s: float = MAX_DELAY_S
    max_retry_after_s: float = MAX_RETRY_AFTER_S

    def retries_status(self, method: str, status: int, attempt: int, outcome_known: bool = False) -> bool:
        """`outcome_known`: a repeated request's effect can be told apart (see the module docstring)."""
        if attempt >= self.max_attempts:
            return False
        return status in ANY_METHOD_STATUSES or (
            status in IDEMPOTENT_STATUSES and (method in IDEMPOTENT_METHODS or outcome_known))

    def retries_connection_error(self, method: str, error: BaseException, attempt: int,
                                 outcome_known: bool = False) -> bool:
        if attempt >= self.max_attempts or _is_timeout(error):
            return False
        return method in IDEMPOTENT_METHODS or outcome_known or _nothing_sent(error)

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        try:
            asked = float(retry_after) if retry_after else None
        except ValueError:
            asked = None
        if asked is not None and asked >= 0:
            return min(asked, self.max_retry_after_s)
        backoff = min(self.first_delay_s * 2 ** (attempt - 1), self.max_delay_s)
        return backoff * random.uniform(0.8, 1.2)  # noqa: S311 - jitter, not cryptography


DEFAULT_POLICY = RetryPolicy()
NO_RETRY = RetryPolicy(max_attempts=1)


def _is_timeout(error: BaseException) -> bool:
    return isinstance(error, urllib3.exceptions.TimeoutError | TimeoutError) or "timed out" in str(error).lower()


def _nothing_sent(error: BaseException) -> bool:
    reason = getattr(error, "reason", None)
    return isinstance(error, urllib3.exceptions.NewConnectionError | ConnectionRefusedError) or isinstance(
        reason, urllib3.exceptions.NewConnectionError | ConnectionRefusedError)
