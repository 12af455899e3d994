"""``command_args.yaml.j2``: a Jinja2 template rendered with the effective configuration, then parsed as YAML.

The result maps ``"group command"`` (optionally ``"prefix/group command"`` or ``"group command/suffix"``) to the
command's keyword arguments. Lookup is exact; ``extra`` overrides rendered values; keys starting with ``_`` are dropped;
a value left as ``SET_AT_RUNTIME`` is an error.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_topsail.config import Config, parse_yaml
from pytest_topsail.errors import TopsailError

SET_AT_RUNTIME = "SET_AT_RUNTIME"
TEMPLATE_FILE = "command_args.yaml.j2"
_log = logging.getLogger(__name__)


class TemplateRaised(Exception):
    """Raised by the ``raise_exception`` filter; reported with the template line."""


def _or_env(value: Any, env_name: str) -> Any:
    """``value`` when truthy, else the environment variable ``env_name`` (error when unset)."""
    if value:
        return value
    if env_name not in os.environ:
        raise TemplateRaised(f"value is empty and environment variable {env_name} is not set")
    return os.environ[env_name]


def _or_env_unchecked(value: Any, env_name: str) -> Any:
    """``or_env`` when checking the template at start-up: the variable may be exported later (by a fixture)."""
    return value or os.environ.get(env_name, f"<${env_name}>")


def _raise_exception(message: str) -> None:
    raise TemplateRaised(str(message))


def _log_warning(message: str) -> str:
    _log.warning("%s", message)
    return ""


def render_template(path: Path, context: Mapping[str, Any], shown: str | None = None,
                    check_only: bool = False) -> str:
    """Render ``path`` with ``context``; undefined variables and ``raise_exception`` name the file (as ``shown``)
    and line. ``check_only``: a start-up check, where an unset ``or_env`` variable is no error yet."""
    import jinja2

    path = Path(path)
    shown = shown or str(path)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(path.parent)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    env.filters.update(or_env=_or_env_unchecked if check_only else _or_env, raise_exception=_raise_exception,
                       log_warning=_log_warning)
    env.globals.update(raise_exception=_raise_exception)
    try:
        template = env.get_template(path.name)
    except jinja2.TemplateNotFound:
        raise TopsailError(f"{shown}: template not found") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TopsailError(f"{shown}:{exc.lineno}: template syntax error: {exc.message}") from None
    try:
        return template.render(**context)
    except jinja2.UndefinedError as exc:
        line = _template_line(exc, template.filename)
        raise TopsailError(f"{shown}:{line}: undefined variable ({exc}){_source_line(path, line)}") from None
    except TemplateRaised as exc:
        raise TopsailError(f"{shown}:{_template_line(exc, template.filename)}: {exc}") from None


def _source_line(path: Path, line: str) -> str:
    """``: <the template line>`` to show which variable is undefined (Jinja2 only names the last attribute)."""
    if not line.isdigit():
        return ""
    lines = path.read_text(encoding="utf-8").splitlines()
    number = int(line)
    return f" in: {lines[number - 1].strip()}" if 0 < number <= len(lines) else ""


def _template_line(exc: BaseException, filename: str | None) -> str:
    """The template line where ``exc`` happened (Jinja2 rewrites tracebacks to point into the template)."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == filename]
    return str(lines[-1]) if lines else "?"


def render_command_args(path: Path, config: Config, shown: str | None = None,
                        check_only: bool = False) -> dict[str, dict[str, Any]]:
    """Render the template with the configuration and parse it: ``{"group command": {kwargs}}``."""
    import yaml

    shown = shown or str(path)
    text = render_template(path, config.as_dict(), shown, check_only)
    try:
        document = parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (rendered line {mark.line + 1})" if mark is not None else ""
        raise TopsailError(f"{shown}: the rendered template is not valid YAML{where}: "
                           f"{getattr(exc, 'problem', exc)}") from None
    if document is None:
        return {}
    if not isinstance(document, dict) or not all(isinstance(value, dict | None) for value in document.values()):
        raise TopsailError(f"{shown}: the rendered template must map 'group command' keys to mappings of arguments")
    return {str(key): dict(value or {}) for key, value in document.items()}


def command_key(command: str, prefix: str | None = None, suffix: str | None = None) -> str:
    key = command
    if prefix:
        key = f"{prefix}/{key}"
    if suffix:
        key = f"{key}/{suffix}"
    return key


def lookup(rendered: Mapping[str, Mapping[str, Any]], command: str, prefix: str | None = None,
           suffix: str | None = None, extra: Mapping[str, Any] | None = None, source: str = TEMPLATE_FILE,
           ) -> dict[str, Any]:
    """Arguments of ``command`` (exact key): ``extra`` applied, ``_private`` keys dropped, runtime values checked."""
    key = command_key(command, prefix, suffix)
    if key not in rendered:
        raise TopsailError(f"{source}: no command {key!r}; commands defined: {', '.join(rendered) or 'none'}")
    args = {name: value for name, value in rendered[key].items() if not str(name).startswith("_")}
    args.update(extra or {})
    unresolved = _unresolved(args, "")
    if unresolved:
        raise TopsailError(f"{source}: {key!r}: {', '.join(unresolved)} still {SET_AT_RUNTIME}; "
                           "pass the value with extra={...}")
    return args


def _unresolved(value: Any, path: str) -> list[str]:
    if value == SET_AT_RUNTIME:
        return [path]
    if isinstance(value, Mapping):
        return [found for name, item in value.items()
                for found in _unresolved(item, f"{path}.{name}" if path else str(name))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _unresolved(item, f"{path}[{index}]")]
    return []


def command_args(suite_path: Path, config: Config, command: str, prefix: str | None = None,
                 suffix: str | None = None, extra: Mapping[str, Any] | None = None,
                 shown: str | None = None) -> dict[str, Any]:
    """Render ``<suite_path>/command_args.yaml.j2`` with ``config`` now, and return ``command``'s arguments."""
    path = Path(suite_path) / TEMPLATE_FILE
    shown = shown or str(path)
    return lookup(render_command_args(path, config, shown), command, prefix, suffix, extra, source=shown)
