"""JSON lines files (KPI history exports, request records, prompt datasets): one reader for all.

``read_json_lines(path, label)`` yields ``(line number, value)`` for each non-blank line. A file that cannot be read,
is not UTF-8 or holds a line that is not JSON is one ``TopsailError`` naming ``label``, the file and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError


def read_json_lines(path: Path, label: str = "") -> Iterator[tuple[int, Any]]:
    name = f"{label} {path}" if label else str(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        bad_line = error.object[:error.start].count(b"\n") + 1
        raise TopsailError(f"{name}:{bad_line}: not UTF-8 text ({error.reason}: byte "
                           f"0x{error.object[error.start]:02x} at offset {error.start}); save it as UTF-8") from None
    except OSError as error:
        raise TopsailError(f"{name}: cannot be read: {error.strerror or error}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise TopsailError(f"{name}:{number}: not JSON: {error.msg}") from None
        yield number, value
