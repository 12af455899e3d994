"""Prometheus's HTTP API (query_range, targets, readiness), with a bearer token and TLS as configured.

Every failure is a ``PrometheusError`` whose message names the URL and the cause in one line (unreachable, timeout,
401/403, bad query); the token is never part of a message, a log or an artifact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import requests

from pytest_topsail.errors import TopsailError


class PrometheusError(TopsailError):
    """Prometheus could not answer: the message names the URL and why."""


@dataclass
class Prometheus:
    url: str  # base URL, e.g. http://127.0.0.1:9090 or https://thanos-querier-openshift-monitoring.apps.example
    token: str | None = field(default=None, repr=False)
    verify: bool | str = True  # requests' verify: a CA file, True (system CAs) or False (insecure)
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        self._session = requests.Session()
        self._session.verify = self.verify
        if self.token:
            self._session.headers["Authorization"] = f"Bearer {self.token}"

    def close(self) -> None:
        self._session.close()

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        where = f"Prometheus {self.url}"
        try:
            response = self._session.get(self.url + path, params=params, timeout=self.timeout_s)
        except requests.exceptions.SSLError as error:
            raise PrometheusError(f"{where}: TLS verification failed ({_short(error)}); set metrics.prometheus."
                                  "ca_file, or metrics.prometheus.insecure: true") from None
        except requests.exceptions.Timeout:
            raise PrometheusError(f"{where}: no answer within {self.timeout_s:g} s") from None
        except requests.exceptions.ConnectionError as error:
            raise PrometheusError(f"{where}: unreachable ({_short(error)})") from None
        except requests.exceptions.RequestException as error:
            raise PrometheusError(f"{where}: request failed ({_short(error)})") from None
        if response.status_code in (401, 403):
            told = "no token was sent" if not self.token else "the token was refused"
            raise PrometheusError(f"{where}: HTTP {response.status_code} {response.reason} ({told}; "
                                  "metrics.prometheus.token: kubeconfig or a token file)")
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"{where}{path}: HTTP {response.status_code}, not a Prometheus API answer: "
                                  f"{response.text[:200]!r}") from None
        if response.status_code != 200 or body.get("status") != "success":
            raise PrometheusError(f"{where}{path}: HTTP {response.status_code}: {body.get('errorType', '')} "
                                  f"{body.get('error', '')}".rstrip())
        return body.get("data")

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """The matrix of ``query`` over [start, end]: ``[{"metric": {labels}, "values": [[t, "v"], ...]}, ...]``."""
        data = self._get("/api/v1/query_range", {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step:g}"})
        return list((data or {}).get("result") or [])

    def query(self, query: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": query} | ({"time": f"{at:.3f}"} if at is not None else {})
        return list((self._get("/api/v1/query", params) or {}).get("result") or [])

    def targets(self) -> list[dict[str, Any]]:
        return list((self._get("/api/v1/targets", {"state": "active"}) or {}).get("activeTargets") or [])


def _short(error: BaseException) -> str:
    """The innermost reason of a requests error ("Connection refused"), not its nested repr."""
    text = str(error)
    for marker in ("Errno", "Connection refused", "Name or service not known", "certificate verify failed"):
        index = text.find(marker)
        if index >= 0:
            return text[index:].split("'")[0].split(")")[0].strip().rstrip(",")
    return text[:160]
