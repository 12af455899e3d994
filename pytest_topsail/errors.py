"""Errors a user can cause. The message is the whole story: it names the file, key or object."""

from __future__ import annotations

import re
from types import UnionType
from typing import Any, Union, get_args, get_origin

# "<file>: <section>" (settings.where, a suite's sections): the section is the start of every key path the user wrote
_SECTION = re.compile(r"(?P<file>.+): (?P<section>[A-Za-z_][\w.\-\[\]]*)")


class TopsailError(Exception):
    """A user-caused error (bad YAML, unknown preset, unreachable cluster, timeout, ...).

    The plugin turns it into one clear message and a non-zero exit, never a bare traceback.
    """


def describe_validation_error(error: Any, where: str, what: str = "", model: Any = None,
                              typed: dict[str, str] | None = None, under: str = "") -> str:
    """One message for a pydantic ``ValidationError``: ``<where>: <what>: key a.b[0]: expected ...; key c: ...``.

    `where` names the file or object, `what` what was being validated ("invalid simulator profile"); with the
    `model`, an unknown key lists the known ones (those of the nested model it was found in). This is the one
    formatter of validation errors; build a TopsailError from it (or use pytest_topsail.settings.validate).
    ``typed`` maps an internal key path to the key the user wrote (a shortcut such as ``nodes`` for
    ``node_pools[0].count``), which the message names instead.
    A `where` of the form ``<file>: <section>`` (a configuration section, e.g. ``suites/x/config.yaml: cluster.sim``)
    names each key whole, as the user writes it in the file or a ``--var``: ``<file>: <what>: key cluster.sim.nodes:
    ...`` (a problem of the whole section: ``<file>: <what>: cluster.sim: ...``). `under` is the key path of the
    validated mapping inside that section or file (``plugins.fine_tuning``).
    """
    section = ""
    if (match := _SECTION.fullmatch(where)) is not None:
        where, section = match["file"], match["section"]
    problems = []
    for detail in _unions_merged(error.errors(include_url=False)):
        problem = _problem(detail)
        if detail.get("type") == "extra_forbidden" and model is not None:
            known = _known_keys(model, tuple(detail["loc"][:-1]))
            problem += f"; known: {', '.join(known)}" if known else ""
        key = _key_path(detail["loc"])
        key = ".".join(part for part in (section, under, (typed or {}).get(key, key)) if part).replace(".[", "[")
        if detail["loc"]:
            problems.append(f"key {key}: {problem}")
        else:
            whole = ".".join(part for part in (section, under) if part)
            problems.append(f"{whole}: {problem}" if whole else problem)
    head = f"{where}: {what}: " if what else f"{where}: "
    return head + "; ".join(problems)


_TYPE_TAGS = {"str", "int", "float", "bool", "none", "bytes", "dict", "list"}


def _union_member(part: Any) -> bool:
    """A location part pydantic adds for a member of a union (``literal['a','b']``, ``bool``), not a user's key."""
    return isinstance(part, str) and ("[" in part or part in _TYPE_TAGS or part.startswith("function-"))


def _unions_merged(details: list[Any]) -> list[dict[str, Any]]:
    """One problem per key a union refused: pydantic's errors of each member (located at ``key.<member>``) become
    ``key: Input should be 'a' or 'b', or a valid boolean``."""
    members: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for detail in details:
        location = tuple(detail["loc"])
        if location and _union_member(location[-1]):
            members.setdefault(location[:-1], []).append(detail)
    merged, done = [], set()
    for detail in details:
        location = tuple(detail["loc"])
        group = members.get(location[:-1], []) if location and _union_member(location[-1]) else []
        if len(group) < 2:
            merged.append(detail)
            continue
        if location[:-1] in done:
            continue
        done.add(location[:-1])
        texts = [str(member.get("msg", "")) for member in group]
        text = texts[0] + "".join(", or " + t.removeprefix("Input should be ") for t in texts[1:])
        merged.append({"type": "union", "loc": location[:-1], "msg": text, **(
            {"input": group[0]["input"]} if "input" in group[0] else {})})
    return merged


def _known_keys(model: Any, location: tuple[Any, ...]) -> list[str]:
    """The keys of the (nested) pydantic model at `location` of `model`; [] when that is no model."""
    annotation: Any = model
    for part in location:
        annotation = _without_none(annotation)
        fields = getattr(annotation, "model_fields", None)
        if isinstance(fields, dict):
            if part not in fields:
                return []
            annotation = fields[part].annotation
            continue
        members = getattr(annotation, "__args__", ())  # list[X], dict[str, X], or a union tagged by member name
        named = [member for member in members if getattr(member, "__name__", None) == part]
        annotation = named[0] if named else (members[-1] if members else None)
    fields = getattr(_without_none(annotation), "model_fields", None)
    return sorted(fields) if isinstance(fields, dict) else []


def _without_none(annotation: Any) -> Any:
    """`X` of ``X | None``, else `annotation`."""
    if get_origin(annotation) not in (Union, UnionType):
        return annotation
    members = [member for member in get_args(annotation) if member is not type(None)]
    return members[0] if len(members) == 1 else annotation


def _key_path(location: tuple[Any, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location).lstrip(".")


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
