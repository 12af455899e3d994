"""Per-item figure files (``general.html`` and the like) that work offline, without a copy of plotly.js each.

One ``plotly.min.js`` (from the installed plotly package) is written once at the artifacts root; each figure file
loads it by a relative path, so the artifacts directory can be moved or archived whole and still works with no
network. Never a CDN.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

PLOTLY_JS = "plotly.min.js"
SEARCH_LEVELS = 4  # a figure file sits in <root>/<suite>/NNN__item/ (or one level deeper)


def plotly_source() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / PLOTLY_JS


def shared_plotly_js(root: Path) -> Path:
    """``<root>/plotly.min.js``, written once (atomically: xdist workers may race)."""
    path = root / PLOTLY_JS
    source = plotly_source()
    if path.is_file() and path.stat().st_size == source.stat().st_size:
        return path
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".{PLOTLY_JS}.{os.getpid()}.partial"
    shutil.copyfile(source, partial)
    os.replace(partial, path)
    return path


def find_plotly_js(directory: Path) -> Path | None:
    """The shared plotly.min.js of the artifacts ``directory`` belongs to (a replot of saved items), if any."""
    for parent in [directory, *directory.parents][:SEARCH_LEVELS + 1]:
        if (parent / PLOTLY_JS).is_file():
            return parent / PLOTLY_JS
    return None


def write_figure_html(figure: Any, path: Path, plotly_js: Path | None = None) -> Path:
    """Write a plotly figure as a full HTML page loading ``plotly_js`` by a relative path; without one, the
    shared file of the artifacts the page belongs to, else a plotly.min.js beside the page."""
    plotly_js = plotly_js or find_plotly_js(path.parent) or shared_plotly_js(path.parent)
    relative = Path(os.path.relpath(plotly_js, path.parent)).as_posix()
    figure.write_html(str(path), include_plotlyjs=relative, full_html=True)
    return path
