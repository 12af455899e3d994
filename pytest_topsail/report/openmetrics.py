"""KPIs as OpenMetrics text (``kpis.prom``): ``# HELP``, ``# TYPE``, ``# UNIT`` per KPI, one sample per record."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_LABEL_NAME = re.compile(r"[^a-zA-Z0-9_]")


def label_name(key: str) -> str:
    name = _LABEL_NAME.sub("_", key)
    return f"_{name}" if name[:1].isdigit() else name


def escape_value(value: Any) -> str:
    text = "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def sample_labels(record: dict[str, Any]) -> str:
    labels = {"suite": record.get("suite"), "test_id": record.get("test_id"), **(record.get("labels") or {})}
    seen: dict[str, str] = {}
    for key, value in labels.items():
        seen.setdefault(label_name(key), escape_value(value))
    return ",".join(f'{key}="{value}"' for key, value in sorted(seen.items()))


def render(records: Iterable[dict[str, Any]]) -> str:
    families: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        families.setdefault(record["name"], []).append(record)
    lines: list[str] = []
    for name in sorted(families):
        first = families[name][0]
        lines.append(f"# HELP {name} {escape_help(first.get('help', ''))}")
        lines.append(f"# TYPE {name} gauge")
        if first.get("unit"):
            lines.append(f"# UNIT {name} {escape_help(first['unit'])}")
        for record in families[name]:
            lines.append(f"{name}{{{sample_labels(record)}}} {float(record['value'])!r}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"
