"""PR directives, as TOPSAIL's CI turns a PR comment into presets and overrides: ``/test <job> <preset>...`` and
``/var KEY: VALUE`` lines (``--topsail-pr-args FILE``), or the ``variable_overrides.yaml`` TOPSAIL's CI writes from
them (``KEY: VALUE`` entries and ``PR_POSITIONAL_ARG_N: <preset> ...``; read from ``$ARTIFACT_DIR`` when no option
is given, ``PR_POSITIONAL_ARG_N`` from the environment when that file names no preset).

Every directive keeps where it was written (``file:line``): a bad line, a preset no collected suite defines or a key
no suite has is one error naming it, all bad lines reported at once (``suites.check_pr_args_known``). The effective
configuration applies them in TOPSAIL's order (:func:`pytest_topsail.config.apply_presets_and_overrides`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_topsail.config import parse_key, parse_value
from pytest_topsail.errors import TopsailError

OVERRIDES_FILE = "variable_overrides.yaml"
POSITIONAL_ARG = re.compile(r"PR_POSITIONAL_ARG_(\d+)")
POSITIONAL_PREFIX = "PR_POSITIONAL_ARG"  # every key of TOPSAIL's CI that starts so is a positional argument, not a key


@dataclass(frozen=True)
class Directive:
    """A preset (``value`` None) or an override ``key: value``, and where it was written."""

    origin: str  # "file:line" or "$PR_POSITIONAL_ARG_1"
    key: str
    value: Any = None


@dataclass
class PrArgs:
    """The presets and overrides of a PR's directives, in the order written."""

    presets: list[Directive] = field(default_factory=list)
    overrides: list[Directive] = field(default_factory=list)

    @property
    def preset_names(self) -> list[str]:
        return [directive.key for directive in self.presets]

    @property
    def override_pairs(self) -> list[tuple[str, Any]]:
        return [(directive.key, directive.value) for directive in self.overrides]


def read_pr_args(option: str | None, invocation_dir: Path, environ: Mapping[str, str] | None = None) -> PrArgs:
    """The PR directives of this run: ``--topsail-pr-args FILE`` (a PR comment or a variable_overrides.yaml), else
    ``$ARTIFACT_DIR/variable_overrides.yaml`` when it exists and ``PR_POSITIONAL_ARG_N`` of the environment."""
    environ = os.environ if environ is None else environ
    if option:
        path = invocation_dir / option
        return _read_file(path, option)
    artifact_dir = environ.get("ARTIFACT_DIR")
    found = PrArgs()
    if artifact_dir and (Path(artifact_dir) / OVERRIDES_FILE).is_file():
        path = Path(artifact_dir) / OVERRIDES_FILE
        found = parse_overrides_file(_read_text(path, str(path)), str(path))
    if not found.presets:
        found.presets = presets_from_environment(environ)
    return found


def _read_file(path: Path, shown: str) -> PrArgs:
    text = _read_text(path, shown)
    first = next((line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")),
                 "")
    if first.startswith("/"):
        return parse_comment(text, shown)
    return parse_overrides_file(text, shown)


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopsailError(f"--topsail-pr-args {shown}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopsailError(f"--topsail-pr-args {shown}: cannot read: {exc}") from None


def parse_comment(text: str, shown: str) -> PrArgs:
    """A PR comment: ``/test <job> <preset>...`` (one such line) and ``/var KEY: VALUE`` lines; other text is
    prose and ignored; any other ``/directive`` is an error."""
    found, errors = PrArgs(), []
    test_line = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped.startswith("/"):
            continue
        directive, _, rest = stripped.partition(" ")
        origin = f"{shown}:{number}"
        try:
            if directive == "/test":
                if test_line:
                    raise TopsailError(f"a second /test line (the first is line {test_line})")
                test_line = number
                words = rest.split()
                if not words:
                    raise TopsailError("expected '/test <job> <preset> ...'")
                found.presets += [Directive(origin, word) for word in words[1:]]
            elif directive == "/var":
                found.overrides.append(_var_line(rest, origin))
            else:
                raise TopsailError(f"unknown directive {directive!r} (read here: /test <job> <preset> ..., "
                                   "/var KEY: VALUE)")
        except TopsailError as exc:
            errors.append(f"{origin}: {exc}")
    raise_all(errors)
    return found


def _var_line(rest: str, origin: str) -> Directive:
    key, sep, raw = rest.partition(":")
    key = key.strip()
    if not sep or not key:
        raise TopsailError("expected '/var KEY: VALUE'")
    parse_key(key)
    return Directive(origin, key, parse_value(raw, "/var"))


def parse_overrides_file(text: str, shown: str) -> PrArgs:
    """TOPSAIL's ``variable_overrides.yaml``: ``KEY: VALUE`` overrides; ``PR_POSITIONAL_ARG_N`` (N >= 1) values
    are preset names separated by spaces (``PR_POSITIONAL_ARG_0`` is the job's name)."""
    import yaml

    from pytest_topsail.yamlparse import parse_yaml

    try:
        document = parse_yaml(text)
        lines = _key_lines(text)
    except yaml.YAMLError as exc:
        raise TopsailError(f"{shown}: malformed YAML: {exc}") from None
    if document is None:
        return PrArgs()
    if not isinstance(document, dict):
        raise TopsailError(f"{shown}: expected a mapping of keys to values, got {type(document).__name__}")
    found, errors, positional = PrArgs(), [], []
    for key, value in document.items():
        origin = f"{shown}:{lines.get(str(key), 1)}"
        try:
            if not isinstance(key, str):
                raise TopsailError(f"key {key!r} must be text")
            match = POSITIONAL_ARG.fullmatch(key)
            if match:
                positional.append((int(match[1]), origin, value))
            elif not key.startswith(POSITIONAL_PREFIX):
                parse_key(key)
                found.overrides.append(Directive(origin, key, value))
        except TopsailError as exc:
            errors.append(f"{origin}: {exc}")
    for index, origin, value in sorted(positional, key=lambda item: item[0]):
        if index == 0:
            continue
        if not isinstance(value, str):
            errors.append(f"{origin}: PR_POSITIONAL_ARG_{index} must be preset names, got {value!r}")
            continue
        found.presets += [Directive(origin, word) for word in value.split()]
    raise_all(errors)
    return found


def _key_lines(text: str) -> dict[str, int]:
    """Top-level key -> its line (1-based)."""
    import yaml

    node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(key.value): key.start_mark.line + 1 for key, _ in node.value}


def presets_from_environment(environ: Mapping[str, str]) -> list[Directive]:
    """``PR_POSITIONAL_ARG_1``, ``_2``, ... of the environment, each split on spaces, in order."""
    numbered = sorted((int(match[1]), name) for name in environ if (match := POSITIONAL_ARG.fullmatch(name)))
    return [Directive(f"${name}", word) for index, name in numbered if index >= 1 for word in environ[name].split()]


def raise_all(errors: list[str]) -> None:
    """One error naming every bad directive (``errors``: "origin: problem" lines)."""
    if errors:
        raise TopsailError("PR directives:\n  " + "\n  ".join(errors))
