"""Case YAML files -> pytest parameters, with MatrixBenchmarking-style matrix expansion.

A case file is a YAML list of mappings. Each mapping has a ``name`` and settings. Reserved keys of a case:

- ``raw_lists: [key, ...]``: list-valued settings that are values, not matrix dimensions;
- ``extra_settings: [{...}, ...]``: alternatives deep-merged onto the base settings (one expansion per alternative);
- ``skip_if: [{key: value, ...}, ...]``: combinations matching every key/value of one entry are dropped;
- ``marks: [name, ...]``: pytest marks added to the case's items;
- ``xdist_group: name``: keep the case's items on one xdist worker (``--dist loadgroup``).

Every other list-valued setting is a dimension; the items are the cartesian product, in file order.

Public for suites that build their own matrix (TGIS: model configurations x cases), see docs/configuration.md:
:func:`load_cases`, :func:`expand_case`, :func:`expand_matrix`, :func:`with_variant`, :func:`case_params`,
:func:`parametrize_cases`.
"""

from __future__ import annotations

import glob
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.tree import copy_tree, deep_merge, get_path, leaves, set_path

# Arguments a suite's own pytest_generate_tests parametrized with parametrize_cases (the engine leaves them alone).
PARAMETRIZED_KEY = pytest.StashKey[set[str]]()
RESERVED_CASE_KEYS = ("name", "raw_lists", "extra_settings", "skip_if", "marks", "xdist_group")
_OPTION_KEYS = frozenset(RESERVED_CASE_KEYS) - {"name"}


@dataclass(frozen=True)
class Case:
    """One pytest parameter: a case after matrix expansion."""

    name: str
    id: str
    settings: dict[str, Any]
    source: str = ""
    marks: tuple[str, ...] = ()
    xdist_group: str | None = None
    varying: tuple[str, ...] = field(default=(), compare=False)

    def __repr__(self) -> str:
        return f"Case({self.id!r})"


def resolve_case_files(globs: Iterable[str], rootdir: Path, source: str = "cases") -> list[Path]:
    """Expand ``globs`` (relative to ``rootdir``) to sorted files; a glob that matches nothing is an error."""
    if isinstance(globs, str):
        globs = [globs]
    files: list[Path] = []
    seen: set[Path] = set()
    for pattern in globs:
        if not isinstance(pattern, str) or not pattern:
            raise TopsailError(f"{source}: each entry must be a file path or glob, got {pattern!r}")
        full = pattern if Path(pattern).is_absolute() else str(Path(rootdir) / pattern)
        if glob.has_magic(pattern):
            matches = sorted(Path(p) for p in glob.glob(full, recursive=True) if Path(p).is_file())
            if not matches:
                raise TopsailError(f"{source}: case glob {pattern!r} matches no file (relative to {rootdir})")
        else:
            if not Path(full).is_file():
                raise TopsailError(f"{source}: case file {pattern!r} not found (relative to {rootdir})")
            matches = [Path(full)]
        for path in matches:
            if path not in seen:
                seen.add(path)
                files.append(path)
    return files


def load_cases(globs: Iterable[str], rootdir: Path, source: str = "cases", cache_dir: Path | None = None) -> list[Case]:
    """Read, validate and expand every case of the files ``globs`` names; ids are checked to be unique.

    ``cache_dir``: where parsed case files may be kept between runs (see :func:`pytest_topsail.config.load_yaml`).
    """
    from pytest_topsail.config import load_yaml

    cases: list[Case] = []
    for path in resolve_case_files(globs, rootdir, source):
        shown = _shown_path(path, rootdir)
        entries = load_yaml(path, shown, cache_dir)
        if entries is None or entries == []:
            raise TopsailError(f"{shown}: the case file holds no case (expected a YAML list of mappings with a 'name')")
        if not isinstance(entries, list):
            raise TopsailError(f"{shown}: a case file must be a YAML list of mappings, got {type(entries).__name__}")
        for index, entry in enumerate(entries):
            cases.extend(expand_case(entry, f"{shown}[{index}]"))
    check_unique_ids(cases)
    return cases


def _shown_path(path: Path, rootdir: Path) -> str:
    try:
        return str(path.relative_to(rootdir))
    except ValueError:
        return str(path)


def check_unique_ids(cases: Iterable[Case]) -> None:
    seen: dict[str, Case] = {}
    for case in cases:
        if case.id in seen:
            first = seen[case.id]
            if first.source == case.source:
                raise TopsailError(f"duplicate case id {case.id!r}: two combinations of {case.source} have the same id "
                                   f"(settings {first.settings} and {case.settings}); make the values distinct")
            raise TopsailError(f"duplicate case id {case.id!r}: {first.source} and {case.source}")
        seen[case.id] = case


def expand_case(entry: Any, source: str) -> list[Case]:
    """Expand one case mapping into its matrix of :class:`Case` (reserved keys interpreted, see module doc)."""
    if not isinstance(entry, Mapping):
        raise TopsailError(f"{source}: a case must be a mapping with a 'name', got {type(entry).__name__}")
    name = entry.get("name")
    if not isinstance(name, str | int) or isinstance(name, bool) or str(name) == "":
        raise TopsailError(f"{source}: case without a 'name' (every case needs a non-empty name)")
    name = str(name)
    if _OPTION_KEYS.isdisjoint(entry) and not _has_list(entry):  # the common case: one item, settings as written
        return [Case(name=name, id=name, settings={key: value for key, value in entry.items() if key != "name"},
                     source=source)]
    where = f"{source} (case {name!r})"
    raw_lists = _string_list(entry.get("raw_lists"), "raw_lists", where)
    marks = tuple(_string_list(entry.get("marks"), "marks", where))
    group = entry.get("xdist_group")
    if group is not None and not isinstance(group, str):
        raise TopsailError(f"{where}: xdist_group must be a string")
    base = {key: value for key, value in entry.items() if key not in RESERVED_CASE_KEYS}
    _check_raw_lists(raw_lists, base, entry.get("extra_settings"), where)
    if entry.get("extra_settings") is None and entry.get("skip_if") is None and not _has_list(base):
        return [Case(name=name, id=name, settings=base, source=source, marks=marks, xdist_group=group)]
    declared = _product(base, raw_lists, entry.get("extra_settings"), where)
    # Ids name the keys varying over the declared matrix, so that adding a skip_if never renames other items.
    varying = varying_keys(declared)
    combos = _apply_skip_if(declared, entry.get("skip_if"), where)
    return [Case(name=name, id=case_id(name, settings, varying), settings=settings, source=source,
                 marks=marks, xdist_group=group, varying=tuple(varying))
            for settings in combos]


def _check_raw_lists(raw_lists: list[str], base: Mapping[str, Any], extra_settings: Any, where: str) -> None:
    """Each ``raw_lists`` entry names a setting (its dotted path or its key), else it would be silently ignored."""
    if not raw_lists:
        return
    trees = [base, *(alt for alt in extra_settings or [] if isinstance(alt, Mapping))]
    known = {path for tree in trees for path in _leaf_keys(tree, "")}
    known |= {path.rsplit(".", 1)[-1] for path in known}
    for name in raw_lists:
        if name not in known:
            raise TopsailError(f"{where}: raw_lists names {name!r}, which is not a setting of the case; settings are: "
                               f"{', '.join(sorted(known)) or 'none'}")


def _string_list(value: Any, key: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise TopsailError(f"{where}: {key} must be a list of strings, got {value!r}")


def expand_matrix(settings: Mapping[str, Any], raw_lists: Iterable[str] = (), extra_settings: Any = None,
                  skip_if: Any = None, source: str = "settings") -> list[dict[str, Any]]:
    """The cartesian product of the list-valued settings (dotted keys for nested mappings).

    ``extra_settings`` alternatives are deep-merged onto ``settings`` first (each alternative expanded on its own);
    ``raw_lists`` names lists kept as values; combinations matching a ``skip_if`` entry are dropped.
    """
    combos = _product(settings, raw_lists, extra_settings, source)
    return _apply_skip_if(combos, skip_if, source)


def _product(settings: Mapping[str, Any], raw_lists: Iterable[str], extra_settings: Any,
             source: str) -> list[dict[str, Any]]:
    raw = set(raw_lists)
    if extra_settings is None:
        alternatives: list[Mapping[str, Any]] = [{}]
    elif isinstance(extra_settings, list) and all(isinstance(alt, Mapping) for alt in extra_settings):
        alternatives = extra_settings or [{}]
    else:
        raise TopsailError(f"{source}: extra_settings must be a list of mappings")
    combos: list[dict[str, Any]] = []
    for alternative in alternatives:
        merged = deep_merge(settings, alternative)
        dimensions = _dimensions(merged, raw, "")
        if not dimensions:
            combos.append(merged)
            continue
        keys = [key for key, _ in dimensions]
        for values in itertools.product(*(values for _, values in dimensions)):
            combo = copy_tree(merged)
            for key, value in zip(keys, values, strict=True):
                set_path(combo, key, value, create=False)
            combos.append(combo)
    return combos


def _apply_skip_if(combos: list[dict[str, Any]], skip_if: Any, source: str) -> list[dict[str, Any]]:
    conditions = _skip_conditions(skip_if, source)
    if not conditions:
        return combos
    known_keys = {key for combo in combos for key in _leaf_keys(combo, "")}
    for condition in conditions:
        unknown = [key for key in condition if key not in known_keys]
        if unknown:
            raise TopsailError(f"{source}: skip_if uses unknown key {unknown[0]!r}; settings are: "
                               f"{', '.join(sorted(known_keys)) or 'none'}")
    return [combo for combo in combos if not any(_matches(combo, cond) for cond in conditions)]


def _skip_conditions(skip_if: Any, source: str) -> list[dict[str, Any]]:
    if skip_if is None:
        return []
    if isinstance(skip_if, Mapping):
        skip_if = [skip_if]
    if not isinstance(skip_if, list) or not all(isinstance(cond, Mapping) and cond for cond in skip_if):
        raise TopsailError(f"{source}: skip_if must be a mapping or a list of mappings of setting -> value")
    return [dict(cond) for cond in skip_if]


def _matches(combo: Mapping[str, Any], condition: Mapping[str, Any]) -> bool:
    for key, expected in condition.items():
        actual = get_path(combo, key)
        if isinstance(expected, list) and not isinstance(actual, list):
            if actual not in expected:
                return False
        elif actual != expected:
            return False
    return True


def _dimensions(tree: Mapping[str, Any], raw: set[str], prefix: str) -> list[tuple[str, list[Any]]]:
    dims: list[tuple[str, list[Any]]] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, list) and path not in raw and key not in raw:
            if value:
                dims.append((path, value))
        elif isinstance(value, Mapping):
            dims.extend(_dimensions(value, raw, path + "."))
    return dims


def _has_list(tree: Mapping[str, Any]) -> bool:
    for value in tree.values():
        if isinstance(value, str | int | float):
            continue
        if isinstance(value, list) or isinstance(value, Mapping) and _has_list(value):
            return True
    return False


def _leaf_keys(tree: Mapping[str, Any], prefix: str) -> list[str]:
    keys = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        keys.append(path)
        if isinstance(value, Mapping):
            keys.extend(_leaf_keys(value, path + "."))
    return keys






def varying_keys(combos: list[dict[str, Any]]) -> list[str]:
    """Dotted leaf keys whose value differs between ``combos`` (order of first appearance)."""
    if len(combos) < 2:
        return []
    flats = [leaves(combo) for combo in combos]
    order: dict[str, None] = {}
    for flat in flats:
        order.update(dict.fromkeys(flat))
    missing = object()
    return [key for key in order if len({_freeze(flat.get(key, missing)) for flat in flats}) > 1]



def _freeze(value: Any) -> Any:
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


MAX_ID_VALUE = 40


def format_id_value(value: Any) -> str:
    """A value as shown in ids: short values as written; long ones (prompts...) cut, a hash keeping them unique."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str | int | float):
        text = " ".join(str(value).split()) if isinstance(value, str) else str(value)
    else:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    if len(text) <= MAX_ID_VALUE and (not isinstance(value, str) or text == value):
        return text
    import hashlib

    digest = hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode(), usedforsecurity=False).hexdigest()
    return f"{text[:MAX_ID_VALUE - 9]}~{digest[:8]}"


def case_id(name: str, settings: Mapping[str, Any], varying: Iterable[str]) -> str:
    """``name`` followed by ``key=value`` for each varying key: readable, stable, and what ``-k`` matches."""
    parts = [name]
    for key in varying:
        parts.append(f"{key}={format_id_value(get_path(settings, key))}")
    return "-".join(parts)


def case_params(cases: Iterable[Case]) -> list[Any]:
    """``pytest.param`` objects for ``metafunc.parametrize("case", ...)``: ids, marks and xdist groups attached."""
    params = []
    for case in cases:
        try:
            marks = [getattr(pytest.mark, mark) for mark in case.marks]
        except pytest.fail.Exception as exc:  # --strict-markers and a mark nobody registered
            raise TopsailError(f"{case.source} (case {case.name!r}): marks: {exc.msg}") from None
        if case.xdist_group:
            marks.append(pytest.mark.xdist_group(case.xdist_group))
        params.append(pytest.param(case, id=case.id, marks=marks) if marks else pytest.param(case, id=case.id))
    return params


def with_variant(cases: Iterable[Case], variant: str, settings: Mapping[str, Any] | None = None,
                 xdist_group: str | None = None) -> list[Case]:
    """Copies of ``cases`` for one variant (e.g. a TGIS model configuration): ids ``<variant>-<case id>``,
    ``settings`` deep-merged under each case's own settings, and optionally one xdist group for the variant.

    With :func:`load_cases` and :func:`parametrize_cases` a suite builds its own matrix (model configs x cases).
    """
    if not isinstance(variant, str) or not variant:
        raise TopsailError(f"variant name must be a non-empty string, got {variant!r}")
    return [Case(name=case.name, id=f"{variant}-{case.id}", settings=deep_merge(settings or {}, case.settings),
                 source=f"{case.source} ({variant})", marks=case.marks,
                 xdist_group=xdist_group or case.xdist_group, varying=case.varying)
            for case in cases]


def parametrize_cases(metafunc: Any, cases: Iterable[Case], argname: str = "case") -> None:
    """``metafunc.parametrize(argname, ...)`` with ``cases`` (ids checked to be unique): for a suite's own
    ``pytest_generate_tests``. The engine then leaves ``case`` alone for that test."""
    cases = list(cases)
    check_unique_ids(cases)
    metafunc.parametrize(argname, case_params(cases))
    metafunc.definition.stash[PARAMETRIZED_KEY] = {*metafunc.definition.stash.get(PARAMETRIZED_KEY, ()), argname}
