"""pytest-html columns (when that plugin is installed): the item's KPIs, its verdict, links to the topsail report
and to the item's artifacts; and the one-line verdict in its summary. Every text is escaped."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord
    from pytest_topsail.regression import Verdict

COLUMNS = ("KPIs", "KPI verdict", "topsail")


def header_cells() -> list[str]:
    return [f'<th class="topsail-{name.split()[-1].lower()}">{name}</th>' for name in COLUMNS]


def link(target: Path, base: Path, text: str) -> str:
    relative = Path(os.path.relpath(target, base)).as_posix()
    return f'<a href="{html.escape(quote(relative), quote=True)}">{html.escape(text)}</a>'


def item_verdict(verdicts: Sequence[Verdict]) -> str:
    """``2 regressions (throughput, latency)``, ``1 improvement (...)``, else the states of its KPIs by their one
    name (``accepted``, ``insufficient_history``, ...)."""
    for status in ("regression", "improvement"):
        names = [v.kpi for v in verdicts if v.status == status]
        if names:
            return f"{len(names)} {status}{'s' if len(names) > 1 else ''} ({', '.join(names)})"
    return ", ".join(sorted({v.status for v in verdicts}))


def row_cells(record: ItemRecord | None, verdicts: Sequence[Verdict], html_dir: Path,
              report: Path) -> list[str]:
    if record is None:
        return ["<td></td>"] * len(COLUMNS)
    from pytest_topsail.kpi import format_value

    values = "<br>".join(
        html.escape(f"{k['name']}={format_value(k['value'], k.get('format'))} {k.get('unit', '')}".strip())
        for k in record.kpis)
    verdict = item_verdict(verdicts)
    css = "regression" if verdict.split(" ")[1:2] in (["regression"], ["regressions"]) else "other"
    links = [link(report, html_dir, "report")]
    if record.directory is not None:
        links.append(link(record.directory, html_dir, "artifacts"))
    return [f'<td class="topsail-kpis">{values}</td>',
            f'<td class="topsail-verdict topsail-{css}">{html.escape(verdict)}</td>',
            f'<td class="topsail-links">{" ".join(links)}</td>']


def summary_lines(verdict: str, html_dir: Path, report: Path) -> list[str]:
    return [f"<p>topsail: {html.escape(verdict)} &mdash; {link(report, html_dir, 'KPI report')}</p>"]
