"""Acknowledging regressions: a regression's records stay out of the baseline until someone accepts the change.

Two ways, both recorded with a reason:
- ``python -m pytest_topsail.history ack --history PATH --suite S [--kpi GLOB ...] [--run RUN_ID] --reason TEXT``
  marks the matching stored records (``acknowledged: {reason, at}``);
- an ack file in the suite (``suites/<suite>/acks.yaml``, Orion-style), a list of
  ``{run: RUN_ID | test_uuid: UUID, kpis: [GLOB, ...], reason: TEXT}`` read at every session.
An acknowledged record joins the baseline: the change becomes the new level.
"""

from __future__ import annotations

import datetime
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError

ACK_KEYS = ("run", "test_uuid", "kpis", "reason")


@dataclass(frozen=True)
class Ack:
    reason: str
    kpis: tuple[str, ...] = ()  # glob patterns; empty: every KPI
    run: str | None = None
    test_uuid: str | None = None

    def matches(self, record: dict[str, Any]) -> bool:
        if self.run is not None and record.get("run_id") != self.run:
            return False
        if self.test_uuid is not None and record.get("test_uuid") != self.test_uuid:
            return False
        return not self.kpis or any(fnmatch.fnmatchcase(str(record.get("name")), p) for p in self.kpis)


def pending(record: dict[str, Any]) -> bool:
    """A regression nobody acknowledged yet."""
    return record.get("verdict") == "regression" and not record.get("acknowledged")


def load_ack_file(path: Path) -> list[Ack]:
    """The suite's ack file; a missing file means no ack."""
    from pytest_topsail.config import load_yaml

    if not path.is_file():
        return []
    entries = load_yaml(path)  # errors name the file and line; a key given twice is refused
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise TopsailError(f"{path}: must be a list of {{run or test_uuid, kpis, reason}}")
    return [_ack_entry(entry, f"{path}: entry {number}") for number, entry in enumerate(entries, start=1)]


def _ack_entry(entry: Any, where: str) -> Ack:
    if not isinstance(entry, dict):
        raise TopsailError(f"{where}: must be a mapping with {', '.join(ACK_KEYS)}")
    unknown = sorted(set(entry) - set(ACK_KEYS))
    if unknown:
        raise TopsailError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; known: {', '.join(ACK_KEYS)}")
    if not entry.get("run") and not entry.get("test_uuid"):
        raise TopsailError(f"{where}: names no run and no test_uuid (an ack is for the records of one run)")
    if not str(entry.get("reason") or "").strip():
        raise TopsailError(f"{where}: reason is missing (say why the change is accepted)")
    kpis = entry.get("kpis") or []
    if isinstance(kpis, str):
        kpis = [kpis]
    if not isinstance(kpis, list):
        raise TopsailError(f"{where}: kpis must be a list of KPI names or glob patterns")
    return Ack(reason=str(entry["reason"]).strip(), kpis=tuple(str(k) for k in kpis),
               run=str(entry["run"]) if entry.get("run") else None,
               test_uuid=str(entry["test_uuid"]) if entry.get("test_uuid") else None)


def apply_acks(records: Sequence[dict[str, Any]], acks: Sequence[Ack], source: str) -> None:
    """Mark in memory the pending regressions an ack file entry covers."""
    for record in records:
        if pending(record):
            for ack in acks:
                if ack.matches(record):
                    record["acknowledged"] = {"reason": ack.reason, "by": source}
                    break


def acknowledge(store: Any, suite: str, ack: Ack) -> list[dict[str, Any]]:
    """Mark the stored pending regressions of ``suite`` that ``ack`` covers; returns the records changed."""
    records = store.records(suite)
    changed = [r for r in records if pending(r) and ack.matches(r)]
    if not changed:
        return []
    at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for record in changed:
        record["acknowledged"] = {"reason": ack.reason, "at": at}
    tests = {r["test_uuid"] for r in changed}
    store.add([r for r in records if r["test_uuid"] in tests])  # whole tests: an OpenSearch document is one test
    return changed
