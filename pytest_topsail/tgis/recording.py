"""Record mode: the reference config's answers written into the case files as their expectations.

As tgis-tester's generator does, the answer of the reference config (each model's first) becomes the case's
``response: {responses: [...]}`` (or, for a case written in the streaming form, the list of GenerateStream's
messages; or ``error: {code, message}`` when the server refused the request), in the case file itself. Only that
block of the file is rewritten: comments, key order and every other case stay as they were, so the recorded file
diffs cleanly against the original and tgis-tester reads it back (integers stay integers, NaN is ``.nan``).
Concurrent writers of one file take turns.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

from pytest_topsail.config import load_yaml
from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis.casefile import TgisCase

LOCK_TIMEOUT_S = 60
EXPECTATION_KEYS = ("response", "error")


def record_expectation(rootdir: Path, case: TgisCase, outcome: dict[str, Any]) -> Path:
    """Write ``outcome`` (``responses``, ``stream`` or ``error`` [code, message]) as the expectation of ``case``."""
    path = Path(rootdir) / case.file
    if outcome.get("error") is not None:
        key, value = "error", {"code": outcome["error"][0], "message": outcome["error"][1]}
    elif outcome.get("stream") is not None:
        key, value = "response", outcome["stream"]
    else:
        key, value = "response", {"responses": outcome["responses"]}
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    with FileLock(str(Path(tempfile.gettempdir()) / f"topsail-tgis-record-{digest}.lock"), timeout=LOCK_TIMEOUT_S):
        document = load_yaml(path, case.file)
        entry = document[case.index] if isinstance(document, list) and len(document) > case.index else None
        if not isinstance(entry, dict) or str(entry.get("name", "")).strip() != case.name:
            raise TopsailError(f"{case.file}: case {case.name!r} is no longer at position {case.index}: the file "
                               "changed during the run; record again")
        for old in EXPECTATION_KEYS:
            entry.pop(old, None)
        entry[key] = value
        original = path.read_text(encoding="utf-8")
        text = splice_expectation(original, case.index, key, value)
        if text is None or not _same(yaml.safe_load(text), document):
            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)  # comments lost
        temporary = path.with_name(f".{path.name}.recording")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    return path


def splice_expectation(text: str, index: int, key: str, value: Any) -> str | None:
    """``text`` with case ``index``'s ``response``/``error`` replaced by ``key: value`` and nothing else touched;
    None when the file's layout (flow style) does not allow it."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.SequenceNode) or root.flow_style or index >= len(root.value):
        return None
    entry = root.value[index]
    if not isinstance(entry, yaml.MappingNode) or entry.flow_style or not entry.value:
        return None
    column = entry.value[0][0].start_mark.column
    block = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True, width=120).rstrip("\n")
    block = block.replace("\n", "\n" + " " * column)
    spans = [(k.start_mark.index, _line_end(text, _last_end(v))) for k, v in entry.value
             if isinstance(k, yaml.ScalarNode) and k.value in EXPECTATION_KEYS]
    if not spans:
        end = _line_end(text, _last_end(entry.value[-1][1]))
        return f"{text[:end]}\n{' ' * column}{block}{text[end:]}"
    for position, (start, end) in enumerate(reversed(spans)):
        text = text[:start] + (block if position == len(spans) - 1 else "") + text[end:]
    return text


def _last_end(node: yaml.Node) -> int:
    """Where a node's own text ends (a block collection's end mark lies after the comments that follow it)."""
    if not isinstance(node, yaml.CollectionNode) or node.flow_style or not node.value:
        return int(node.end_mark.index)
    last = node.value[-1]
    return _last_end(last[1] if isinstance(last, tuple) else last)


def _line_end(text: str, index: int) -> int:
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
