"""Suite discovery and loading: ``config.yaml`` + presets + ``--var``, cases, item -> suite.

A suite is a direct subdirectory of the ``topsail_suites`` ini path (default ``suites``) holding a ``config.yaml``.
Loaded suites are kept in ``config.stash`` (``LOADED_KEY``), with the run state (``pytest_topsail.run``) they are
built from; each is loaded once per session (also on the xdist
controller, which does not collect).
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import pytest

from pytest_topsail.cases import Case
from pytest_topsail.config import (
    PRESETS_KEY,
    Config,
    apply_presets_and_overrides,
    closest_config_keys,
    has_key,
    load_yaml,
    preset_descriptions,
    preset_names,
)
from pytest_topsail.errors import TopsailError
from pytest_topsail.run import TopsailState, state_of
from pytest_topsail.xdist_role import SINGLE, Role

if TYPE_CHECKING:
    import pydantic

    from pytest_topsail.pr_args import PrArgs

M = TypeVar("M", bound="pydantic.BaseModel")

CONFIG_FILE = "config.yaml"
SETTINGS_FILE = "settings.py"
CASES_KEY = "cases"
REGRESSION_KEY = "regression"
LTS_STRICT_KEY = "lts.strict"
HISTORY_LOCATION_KEY = "history.location"


@dataclass
class Suite:
    """A loaded suite: its effective configuration and the presets applied to it."""

    name: str
    path: Path
    config: Config
    presets_applied: list[str]
    presets_defined: list[str]
    rootdir: Path
    preset_descriptions: dict[str, str] = field(default_factory=dict)
    cache_dir: Path | None = None  # where parsed case files are kept between runs (pytest's cache), if anywhere
    validated: dict[tuple[str, Any], Any] = field(default_factory=dict, repr=False)
    cluster: str = "sim"  # the run's cluster, sim or kube: a check may depend on it (a model the simulator sizes)
    role: Role = SINGLE  # the xdist role of the process loading it (a worker's controller checked the same input)

    @property
    def config_file(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def has_cases(self) -> bool:
        """True when the suite's items take their `case` from `cases:`."""
        return CASES_KEY in self.config

    @property
    def case_files(self) -> list[str] | None:
        """The ``cases:`` globs of the effective configuration (``None`` when the suite declares none)."""
        globs = self.config.get(CASES_KEY, None)
        if globs is None:
            return None
        if isinstance(globs, str):
            return [globs]
        if not isinstance(globs, list) or not globs or not all(isinstance(glob, str) and glob for glob in globs):
            raise TopsailError(f"{self.config.source}: {CASES_KEY}: expected a case file path or glob, or a non-empty "
                               f"list of them, got {globs!r}")
        return list(globs)

    @functools.cached_property
    def cases(self) -> list[Case]:
        """The suite's cases (``cases:`` globs relative to rootdir), loaded and expanded once."""
        from pytest_topsail.cases import load_cases

        globs = self.case_files
        if globs is None:
            return []
        return load_cases(globs, self.rootdir, source=f"{self._shown(self.config_file)}: cases",
                          cache_dir=self.cache_dir)

    @functools.cached_property
    def case_params(self) -> list[Any]:
        """``pytest.param`` objects for the cases (built once, shared by every test function using ``case``)."""
        from pytest_topsail.cases import case_params

        return case_params(self.cases)

    @functools.cached_property
    def settings_models(self) -> dict[str, Any]:
        """``SETTINGS`` of the suite's settings.py: configuration key -> pydantic model (empty without the file)."""
        if not (self.path / SETTINGS_FILE).is_file():
            return {}  # without importing pydantic
        from pytest_topsail.settings import load_settings_models

        return load_settings_models(self.path / SETTINGS_FILE)

    @overload
    def settings(self, key: str) -> Any: ...

    @overload
    def settings(self, key: str, model: type[M]) -> M: ...

    def settings(self, key: str, model: type[pydantic.BaseModel] | None = None) -> Any:
        """The configuration section `key` validated by `model` (default: the model settings.py declares for it):
        ``suite.settings("tests.x", Model)`` is typed ``Model``; ``suite.settings("tests.x")`` takes the model
        from settings.py, which the type checker cannot see.

        Validated once per process; a section that does not fit is a TopsailError naming config.yaml, every wrong
        key path and what was expected. A missing section validates as an empty mapping (the model's defaults).
        """
        from pytest_topsail.settings import validate

        model = model or self.settings_models.get(key)
        if model is None:
            raise TopsailError(f"{self._shown(self.path / SETTINGS_FILE)}: SETTINGS declares no model for {key!r}")
        if (key, model) not in self.validated:
            where = f"{self.config.source}: {key}"
            self.validated[(key, model)] = validate(model, self.config.get(key, None), where, "invalid settings",
                                                     context={"rootdir": self.rootdir, "suite": self})
        return self.validated[(key, model)]

    def validate(self) -> None:
        """Resolve every reference, check the regression settings, render the suite's command_args.yaml.j2, load
        the cases, validate the declared settings now: bad input is reported before any test runs (also on the
        xdist controller, which collects nothing)."""
        self.config.as_dict()  # unknown references and reference cycles
        if REGRESSION_KEY in self.config:
            from pytest_topsail.regression import RegressionSettings

            RegressionSettings.from_mapping(self.config.get(REGRESSION_KEY), where=f"{self.config.source}: regression")
        self._check_engine_keys()
        from pytest_topsail.templates import check_suite_template

        check_suite_template(self.config)  # command_args.yaml.j2: every entry renders
        self.cases  # noqa: B018 - loads, expands and checks the case files (cached)
        for key in self.settings_models:
            self.settings(key)

    def effective_document(self) -> dict[str, Any]:
        """The effective configuration as shown (``--topsail-show-config``) and written to the artifacts
        (``<suite>/config.yaml``): secret-looking values redacted, the presets applied listed."""
        from pytest_topsail.redact import redact

        return {**redact(self.config.as_dict()), "presets_applied": list(self.presets_applied)}

    def _check_engine_keys(self) -> None:
        """The engine's own scalar keys, by type: ``lts.strict: "yes"`` is no boolean."""
        for key, expected, what in ((LTS_STRICT_KEY, bool, "true or false"),
                                    (HISTORY_LOCATION_KEY, str, "a file path or 'opensearch'")):
            value = self.config.get(key, None)
            if value is not None and not isinstance(value, expected):
                raise TopsailError(f"{self.config.source}: {key} must be {what}, got {value!r}")

    def _shown(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.rootdir))
        except ValueError:
            return str(path)


MAX_FREE_MARKERS = 10  # markers of a -m expression tried in every combination (2**10 evaluations at most)


def discover_suites(suites_root: Path) -> dict[str, Path]:
    """Suite name -> directory, for each direct subdirectory of ``suites_root`` holding a config.yaml."""
    if not suites_root.is_dir():
        return {}
    found = {}
    for entry in sorted(suites_root.iterdir()):
        if entry.is_dir() and (entry / CONFIG_FILE).is_file():
            found[entry.name] = entry
    return found


def suites_in_scope(pytest_config: pytest.Config) -> list[str]:
    """Names of the suites the command-line paths reach (a path inside a suite, or a suite inside a path) and the
    ``-m`` expression can select: a deselected suite shapes nothing (cluster, fixtures, node pools, start-up checks),
    so ``pytest -m tgis`` from the rootdir runs as ``pytest suites/tgis`` does."""
    state = state_of(pytest_config)
    args = [arg.split("::", 1)[0] for arg in pytest_config.args]
    invocation = Path(pytest_config.invocation_params.dir)
    paths = [(invocation / arg).resolve() for arg in args if arg]
    if not any(_related(path, state.suites_root) for path in paths):
        return []
    reached = [name for name, suite_path in discover_suites(state.suites_root).items()
               if any(_related(path, suite_path) for path in paths)]
    markexpr = str(pytest_config.getoption("markexpr", "") or "")
    return [name for name in reached if not markexpr or may_select(markexpr, name, reached)]


def may_select(markexpr: str, suite: str, suites: list[str]) -> bool:
    """Whether ``-m markexpr`` can select an item of ``suite``: its items carry the suite's marker and no other
    suite's; any other marker the expression names may be on an item or not, so every combination is tried."""
    from _pytest.mark.expression import Expression

    try:
        expression = Expression.compile(markexpr)
    except SyntaxError:
        return True  # pytest reports the expression itself
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_.-]*", markexpr)) - set(suites) - {"and", "or", "not"}
    others = sorted(names)[:MAX_FREE_MARKERS]
    for present in itertools.product((False, True), repeat=len(others)):
        markers = {suite, *(name for name, on in zip(others, present, strict=True) if on)}
        if expression.evaluate(lambda name, /, _markers=markers, **_: name in _markers):
            return True
    return False


def _related(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


LOADED_KEY = pytest.StashKey[dict[str, Suite]]()  # the suites loaded in this session, by name


def load_suite(pytest_config: pytest.Config, name: str) -> Suite:
    """The suite ``name`` with its presets and ``--var`` overrides applied; cached for the session."""
    state = state_of(pytest_config)
    with state.lock:
        loaded = pytest_config.stash.setdefault(LOADED_KEY, {})
        if name not in loaded:
            path = state.suites_root / name
            if not (path / CONFIG_FILE).is_file():
                raise TopsailError(f"no suite {name!r}: {path / CONFIG_FILE} not found")
            loaded[name] = build_suite(name, path, state)
        return loaded[name]


def build_suite(name: str, path: Path, state: TopsailState) -> Suite:
    """The suite at `path` with the presets and overrides of `state` applied (not cached: see load_suite)."""
    config_file = path / CONFIG_FILE
    try:
        shown = str(config_file.relative_to(state.rootdir))
    except ValueError:
        shown = str(config_file)
    document = load_yaml(config_file, shown)
    if document is None:
        raise TopsailError(f"{shown}: the configuration is empty (a suite's config.yaml holds at least its "
                           f"'{CASES_KEY}:' and settings)")
    if not isinstance(document, dict):
        raise TopsailError(f"{shown}: the configuration must be a YAML mapping, got {type(document).__name__}")
    presets = document.pop(PRESETS_KEY, None) or {}
    if not isinstance(presets, dict):
        raise TopsailError(f"{shown}: {PRESETS_KEY} must be a mapping of preset names to presets")
    applied = apply_presets_and_overrides(document, presets, shown,
                                          requested=[*state.pr_args.preset_names, *state.presets],
                                          pr_overrides=state.pr_args.override_pairs, var_overrides=state.overrides)
    return Suite(name=name, path=path, config=Config(document, source=shown, directory=path), presets_applied=applied,
                 presets_defined=preset_names(presets), rootdir=state.rootdir, cache_dir=_yaml_cache_dir(state),
                 preset_descriptions=preset_descriptions(presets), cluster=state.cluster,
                 role=state.role)


def _yaml_cache_dir(state: TopsailState) -> Path | None:
    if state.pytest_cache is None:
        return None
    try:
        return Path(state.pytest_cache.mkdir("topsail-yaml"))
    except OSError:
        return None


def load_suites_in_scope(pytest_config: pytest.Config) -> list[Suite]:
    """Load every suite in scope and check that each ``--preset`` and ``--var`` key is known to one of them."""
    state = state_of(pytest_config)
    names = suites_in_scope(pytest_config)
    state.in_scope = names
    suites = [load_suite(pytest_config, name) for name in names]
    if suites:
        check_presets_known(suites, state.presets)
        check_vars_known(suites, state.overrides)
        check_pr_args_known(state.pr_args, suites)
    return suites


def check_presets_known(suites: list[Suite], presets: list[str]) -> None:
    for preset in presets:
        if not any(preset in suite.presets_defined for suite in suites):
            listing = "; ".join(f"{suite.name}: {', '.join(suite.presets_defined) or 'none'}" for suite in suites)
            raise TopsailError(f"--preset {preset!r} is defined by no collected suite (presets per suite: {listing})")


def check_vars_known(suites: list[Suite], overrides: list[tuple[str, Any]]) -> None:
    for key, _ in overrides:
        if any(has_key(suite.config.as_dict(resolve=False), key) for suite in suites):
            continue
        close: list[str] = []
        for suite in suites:
            document = suite.config.as_dict(resolve=False)
            close.extend(f"{suite.name}: {match}" for match in closest_config_keys(document, key))
        hint = f"; closest existing keys: {', '.join(close)}" if close else ""
        files = ", ".join(suite.config.source for suite in suites)
        raise TopsailError(f"--var {key!r}: unknown configuration key in {files}{hint}")


def check_pr_args_known(pr_args: PrArgs, suites: list[Suite]) -> None:
    """Every preset of the directives is defined by a collected suite and every override key is one of their keys;
    else one error listing each bad directive where it was written."""
    from pytest_topsail.pr_args import raise_all

    errors = []
    for directive in pr_args.presets:
        if not any(directive.key in suite.presets_defined for suite in suites):
            listing = "; ".join(f"{suite.name}: {', '.join(suite.presets_defined) or 'none'}" for suite in suites)
            errors.append(f"{directive.origin}: preset {directive.key!r} is defined by no collected suite "
                          f"(presets per suite: {listing})")
    for directive in pr_args.overrides:
        documents = [suite.config.as_dict(resolve=False) for suite in suites]
        if any(has_key(document, directive.key) for document in documents):
            continue
        close = [match for document in documents for match in closest_config_keys(document, directive.key)]
        hint = f"; closest existing keys: {', '.join(close)}" if close else ""
        errors.append(f"{directive.origin}: {directive.key!r} is not a configuration key of any collected suite{hint}")
    raise_all(errors)


def suite_name_of_path(pytest_config: pytest.Config, path: Path) -> str | None:
    """The name of the suite ``path`` belongs to, if any (cheap: no loading)."""
    state = state_of(pytest_config)
    cache = state.suite_of_path_cache
    if path not in cache:
        cache[path] = _suite_name_of_path(state.suites_root, path)
    return cache[path]


def _suite_name_of_path(root: Path, path: Path) -> str | None:
    if root not in path.parents:
        path = path.resolve()  # the suites root is resolved; the path may go through a symlink
        if root not in path.parents:
            return None
    name = path.relative_to(root).parts[0]
    suite_dir = root / name
    return name if suite_dir.is_dir() and (suite_dir / CONFIG_FILE).is_file() else None


def suite_of_path(pytest_config: pytest.Config, path: Path) -> Suite | None:
    name = suite_name_of_path(pytest_config, Path(path))
    return load_suite(pytest_config, name) if name else None


def suite_of_item(item: pytest.Item) -> Suite | None:
    """The suite ``item`` belongs to (its module is at or below the suite directory), or ``None``."""
    return suite_of_path(item.config, Path(item.path))
