"""Errors a user can cause. The message is the whole story: it names the file, key or object."""

from __future__ import annotations

from typing import Any


class TopsailError(Exception):
    """A user-caused error (bad YAML, unknown preset, unreachable cluster, timeout, ...).

    The plugin turns it into one clear message and a non-zero exit, never a bare traceback.
    """


def describe_validation_error(error: Any, where: str, what: str = "") -> str:
    """One message for a pydantic ``ValidationError``: ``<where>: <what>: key a.b[0]: expected ...; key c: ...``.

    `where` names the file or object, `what` what was being validated ("invalid simulator profile"). This is the one
    formatter of validation errors; build a TopsailError from it (or use pytest_topsail.settings.validate).
    """
    problems = []
    for detail in error.errors(include_url=False):
        problems.append(f"key {_key_path(detail['loc'])}: {_problem(detail)}")
    head = f"{where}: {what}: " if what else f"{where}: "
    return head + "; ".join(problems)


def _key_path(location: tuple[Any, ...]) -> str:
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location).lstrip(".")
    return path or "(top level)"


def _problem(detail: dict[str, Any]) -> str:
    kind = detail.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key missing"
    message = str(detail.get("msg", "")).removeprefix("Value error, ")
    if "input" in detail and kind not in ("missing",) and not isinstance(detail["input"], dict | list):
        return f"{message} (got {detail['input']!r})"
    return message
