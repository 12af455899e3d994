"""Record mode: the reference config's answers written into the case files as their expectations.

As tgis-tester's generator does, the answer of the reference config (each model's first) becomes the case's
``response: {responses: [...]}`` (or ``error: {code, message}`` when the server refused the request), in the case
file itself. The file is rewritten as YAML (comments are not kept); concurrent writers of one file take turns.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

from pytest_topsail.config import load_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis.casefile import TgisCase

LOCK_TIMEOUT_S = 60


def record_expectation(rootdir: Path, case: TgisCase, outcome: dict[str, Any]) -> Path:
    """Write ``outcome`` (``responses`` or ``error`` [code, message]) as the expectation of ``case``."""
    path = Path(rootdir) / case.file
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    with FileLock(str(Path(tempfile.gettempdir()) / f"topsail-tgis-record-{digest}.lock"), timeout=LOCK_TIMEOUT_S):
        document = load_yaml(path, case.file)
        entry = document[case.index] if isinstance(document, list) and len(document) > case.index else None
        if not isinstance(entry, dict) or entry.get("name", "").strip() != case.name:
            raise TopsailError(f"{case.file}: case {case.name!r} is no longer at position {case.index}: the file "
                               "changed during the run; record again")
        entry.pop("response", None)
        entry.pop("error", None)
        if outcome.get("error") is not None:
            entry["error"] = {"code": outcome["error"][0], "message": outcome["error"][1]}
        else:
            entry["response"] = {"responses": outcome["responses"]}
        text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)
        temporary = path.with_name(f".{path.name}.recording")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    return path
