"""``command_args.yaml.j2``: the arguments of each command (TOPSAIL's ``run_toolbox_from_config``), rendered from
the effective configuration.

A template is Jinja2 with TOPSAIL's filters (``or_env``, ``raise_exception``, ``log_warning``) and the effective
configuration (references resolved, secret files not read) as its variables; it renders to YAML: a mapping whose
keys are ``[prefix/]group command[/suffix]`` and whose values are that command's arguments. Stricter than TOPSAIL: an
undefined variable is an error naming the file, the line and the line's text (TOPSAIL renders it empty). Keys and
arguments starting with ``_`` are dropped (holders of YAML anchors, arguments commented out).

Where templates live: ``suites/<suite>/command_args.yaml.j2`` (:func:`command_args`, checked at start-up by
:func:`check_suite_template`); a preparation fixture's own template beside its module, whose keys the suite's
template may override (:func:`fixture_command_args`). Each step that uses arguments keeps them
(:func:`write_command_args`, ``command_args.yaml`` in its directory).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pytest_topsail.errors import TopsailError

if TYPE_CHECKING:
    from pytest_topsail.config import Config

TEMPLATE_FILE = "command_args.yaml.j2"
ARGS_FILE = "command_args.yaml"
_log = logging.getLogger("pytest_topsail.templates")


class _RaisedByTemplate(Exception):
    """``raise_exception`` in a template."""


def or_env(value: Any, env_name: str) -> Any:
    """``value`` when it is set (not empty), else the environment variable ``env_name``."""
    if value not in (None, ""):
        return value
    if env_name not in os.environ:
        raise _RaisedByTemplate(f"no value, and the environment variable {env_name} is not set (or_env)")
    return os.environ[env_name]


def raise_exception(message: Any) -> None:
    raise _RaisedByTemplate(str(message))


def log_warning(message: Any) -> str:
    _log.warning("%s", message)
    return ""


def render_template(path: Path, context: Mapping[str, Any], shown: str | None = None) -> dict[str, dict[str, Any]]:
    """Every command's arguments of the template at ``path``: ``"group command"`` -> arguments."""
    shown = shown or str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopsailError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    text = _render(source, context, shown)
    return _parse(text, shown)


def _render(source: str, context: Mapping[str, Any], shown: str) -> str:
    import jinja2

    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                     autoescape=False)  # noqa: S701 - YAML, not HTML
    environment.filters.update(or_env=or_env, raise_exception=raise_exception, log_warning=log_warning)
    try:
        return environment.from_string(source).render(dict(context))
    except jinja2.TemplateSyntaxError as exc:
        raise TopsailError(f"{shown}:{exc.lineno}: template syntax error: {exc.message}") from None
    except (jinja2.UndefinedError, _RaisedByTemplate) as exc:
        line = _template_line(exc.__traceback__)
        what = "undefined variable: " if isinstance(exc, jinja2.UndefinedError) else ""
        quoted = _quote_line(source, line)
        raise TopsailError(f"{shown}:{line or '?'}: {what}{exc}{quoted}") from None


def _template_line(traceback: TracebackType | None) -> int | None:
    """The template line of the innermost template frame (Jinja2 rewrites its frames to the template's lines)."""
    line = None
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == "<template>":
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    return line


def _quote_line(source: str, line: int | None) -> str:
    lines = source.splitlines()
    if line is None or not 0 < line <= len(lines):
        return ""
    return f" (in: {lines[line - 1].strip()})"


def _parse(text: str, shown: str) -> dict[str, dict[str, Any]]:
    import yaml

    from pytest_topsail.yamlparse import parse_yaml

    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (rendered line {mark.line + 1})" if mark is not None else ""
        raise TopsailError(f"{shown}: the rendered template is not valid YAML{where}: "
                           f"{getattr(exc, 'problem', None) or exc}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise TopsailError(f"{shown}: expected a mapping of 'group command' keys to arguments, "
                           f"got {type(document).__name__}")
    commands: dict[str, dict[str, Any]] = {}
    for key, arguments in document.items():
        if str(key).startswith("_"):
            continue
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise TopsailError(f"{shown}: {key!r}: expected a mapping of arguments, got {arguments!r}")
        commands[str(key)] = {name: value for name, value in arguments.items() if not str(name).startswith("_")}
    return commands


def command_key(group: str, command: str, prefix: str | None = None, suffix: str | None = None) -> str:
    """``[prefix/]group command[/suffix]``, as TOPSAIL names a command's entry."""
    return f"{prefix + '/' if prefix else ''}{group} {command}{'/' + suffix if suffix else ''}"


def select(commands: Mapping[str, dict[str, Any]], key: str, extra: Mapping[str, Any] | None,
           shown: str) -> dict[str, Any]:
    """The arguments of ``key`` (exact match), ``extra`` overriding them."""
    if key not in commands:
        known = ", ".join(repr(name) for name in commands) or "none"
        raise TopsailError(f"{shown}: no entry {key!r} (entries: {known})")
    return {**commands[key], **(extra or {})}


def suite_template(config: Config) -> Path | None:
    """The suite's ``command_args.yaml.j2``, if it has one."""
    if config.directory is None:
        return None
    path = Path(config.directory) / TEMPLATE_FILE
    return path if path.is_file() else None


def _shown(config: Config) -> str:
    """The suite template's path as the configuration's source shows its own (relative to the rootdir)."""
    return str(Path(config.source).with_name(TEMPLATE_FILE))


def context_of(config: Config, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The template's variables: the effective configuration (references resolved, secret files not read); each of
    ``defaults``' sections filled in under the configuration's own values (a fixture's settings with their
    defaults)."""
    from pytest_topsail.tree import deep_merge

    document = config.as_dict()
    return deep_merge(defaults, document) if defaults else document


def command_args(group: str, command: str, prefix: str | None = None, suffix: str | None = None,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The arguments of ``[prefix/]group command[/suffix]`` in the running suite's ``command_args.yaml.j2``,
    rendered from its effective configuration now; ``extra`` overrides them (values known only at run time)."""
    from pytest_topsail.config import current_config

    config = current_config()
    if config is None:
        raise TopsailError("command_args(): no suite's test is running (call it from a test or fixture of a suite)")
    path = suite_template(config)
    if path is None:
        raise TopsailError(f"command_args(): the suite of {config.source} has no {TEMPLATE_FILE}")
    shown = _shown(config)
    return select(render_template(path, context_of(config), shown), command_key(group, command, prefix, suffix),
                  extra, shown)


def fixture_command_args(config: Config | None, template: Path, group: str, command: str,
                         defaults: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A preparation fixture's arguments of ``group command``: from the suite's template when it has that entry,
    else from the fixture's own ``template``; rendered with ``defaults`` (the fixture's settings, as its section)
    under the configuration (``config``: the suite's, ``Prep.config``; None: the defaults alone)."""
    key = command_key(group, command)
    context = dict(defaults) if config is None else context_of(config, defaults)
    path = suite_template(config) if config is not None else None
    if config is not None and path is not None:
        commands = render_template(path, context, _shown(config))
        if key in commands:
            return select(commands, key, extra, _shown(config))
    return select(render_template(template, context), key, extra, str(template))


def check_suite_template(config: Config) -> None:
    """At start-up: the suite's template renders (every entry once) from its effective configuration."""
    path = suite_template(config)
    if path is not None:
        render_template(path, context_of(config), _shown(config))


def write_command_args(directory: Path, key: str, arguments: Mapping[str, Any]) -> Path:
    """Keep the arguments a step used: ``command_args.yaml`` in its directory (``key: arguments``, secrets
    redacted), beside its reproducer."""
    import yaml

    from pytest_topsail.redact import redact

    path = Path(directory) / ARGS_FILE
    existing = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    entries = existing if isinstance(existing, dict) else {}
    entries[key] = redact(dict(arguments))
    path.write_text(yaml.safe_dump(entries, sort_keys=False), encoding="utf-8")
    return path
