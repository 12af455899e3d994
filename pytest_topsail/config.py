"""The configuration document of a suite: keys (``a.b``, ``a.b[2]``, ``ci_presets.light["x.y"]``), references
resolved when read (``@key``, ``{@key}``, ``*$@key`` secret files), presets, overrides, freezing.

TOPSAIL semantics (docs/configuration.md, "Coming from TOPSAIL"), without its weaknesses: presets are applied key by
key in YAML order, ``extends`` at its position, whole dict/list values replace wholesale (copied: a later change never
leaks back into the preset), only existing keys may be set, a preset may change another preset; the order of
:func:`apply_presets_and_overrides` is TOPSAIL's. Cycles, unknown keys and unknown presets are reported
as :class:`~pytest_topsail.errors.TopsailError` naming the preset, key and file.
"""

from __future__ import annotations

import contextvars
import copy
import difflib
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.tree import paths, set_path
from pytest_topsail.yamlparse import parse_yaml

PRESETS_KEY = "ci_presets"
TO_APPLY_KEY = "to_apply"
EXTENDS_KEY = "extends"
DESCRIPTION_KEY = "description"  # a preset's one-line description (what it runs, how long): shown, never applied
# Keys a preset may set even when the base configuration does not define them.
RESERVED_KEYS = frozenset({"cases"})
_MISSING: Any = object()

# The configuration of the suite whose item is running (set by the plugin around each item); Parallel freezes it.
_current_config: contextvars.ContextVar[Config | None] = contextvars.ContextVar("topsail_config", default=None)


def load_yaml(path: Path, shown: str | None = None, cache_dir: Path | None = None) -> Any:
    """Parse a YAML file with the safe loader; errors name the file (as ``shown``) and line.

    With ``cache_dir``, the parsed document is kept there (keyed by the file's path, checked against a hash of its
    bytes): collecting 10,000 cases again costs a hash and a ``marshal.loads`` instead of a YAML parse.
    """
    import yaml

    shown = shown or str(path)
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise TopsailError(f"{shown}: file not found") from None
    except OSError as exc:
        raise TopsailError(f"{shown}: cannot read: {exc.strerror}") from None
    cached = _read_cached(cache_dir, path, raw) if cache_dir is not None else _MISSING
    if cached is not _MISSING:
        return cached
    try:
        document = parse_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TopsailError(f"{shown}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except yaml.YAMLError as exc:
        raise TopsailError(f"{shown}: malformed YAML: {_describe_yaml_error(exc)}") from None
    if cache_dir is not None:
        _write_cached(cache_dir, path, raw, document)
    return document


_CACHE_FORMAT = "topsail-yaml-2"  # 2: duplicate keys are errors


def _cache_entry(cache_dir: Path, path: Path, raw: bytes) -> tuple[Path, str]:
    import hashlib

    import yaml

    name = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:32]
    digest = hashlib.sha256(raw + f"{_CACHE_FORMAT} {yaml.__version__}".encode()).hexdigest()
    return Path(cache_dir) / f"{name}.marshal", digest


def _read_cached(cache_dir: Path, path: Path, raw: bytes) -> Any:
    import marshal

    entry, digest = _cache_entry(cache_dir, path, raw)
    try:
        stored_digest, document = marshal.loads(entry.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return _MISSING
    return document if stored_digest == digest else _MISSING


def _write_cached(cache_dir: Path, path: Path, raw: bytes, document: Any) -> None:
    """Best effort: documents marshal cannot hold (dates) and unwritable directories are simply not cached."""
    import marshal
    import os

    entry, digest = _cache_entry(cache_dir, path, raw)
    try:
        data = marshal.dumps((digest, document))
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, entry)
    except (ValueError, OSError):
        return


def _describe_yaml_error(exc: Exception) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def dump_yaml(data: Any) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, default_flow_style=False, allow_unicode=True)


# --- keys: dotted names, list items, quoted names -------------------------------------------------------------------

Part = str | int
_NAME = re.compile(r"[^.\[\]]+")
_BRACKET = re.compile(r"""\[(?:(?P<index>\d+)|"(?P<double>[^"]+)"|'(?P<single>[^']+)')\]""")
_PLAIN_NAME = re.compile(r"[^.\[\]\"']+")


def parse_key(key: str) -> tuple[Part, ...]:
    """A configuration key as the parts it walks: ``a.b[2]`` -> ``('a', 'b', 2)``,
    ``ci_presets.light["tests.x.gpu"]`` -> ``('ci_presets', 'light', 'tests.x.gpu')``."""
    if not isinstance(key, str) or not key:
        raise _invalid_key(key)
    parts: list[Part] = []
    position = 0
    while position < len(key):
        bracket = _BRACKET.match(key, position)
        if bracket is not None:
            index = bracket["index"]
            parts.append(int(index) if index is not None else bracket["double"] or bracket["single"])
            position = bracket.end()
            continue
        if parts:
            if key[position] != ".":
                raise _invalid_key(key)
            position += 1
        name = _NAME.match(key, position)
        if name is None:
            raise _invalid_key(key)
        parts.append(name.group())
        position = name.end()
    return tuple(parts)


def _invalid_key(key: Any) -> TopsailError:
    return TopsailError(f"invalid configuration key {key!r}: expected dotted names like 'tests.scale.jobs', list items "
                        "like 'args[2]' or quoted names like 'ci_presets.light[\"tests.x.gpu\"]'")


def split_key(key: str) -> list[str]:
    """A dotted key's names (``--var`` keys, references): list items and quoted names are allowed too, as
    :func:`parse_key` reads them."""
    return [str(part) for part in parse_key(key)]


def format_key(parts: tuple[Part, ...] | list[Part]) -> str:
    """The key of ``parts`` as written in a preset: names with a dot in brackets, list items as ``[n]``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_NAME.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text


def _walk(data: Any, parts: tuple[Part, ...]) -> Any:
    """The value at ``parts``, or ``_MISSING``."""
    node = data
    for part in parts:
        if isinstance(node, Mapping) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return _MISSING
    return node


def has_key(data: Any, key: str) -> bool:
    return _walk(data, parse_key(key)) is not _MISSING


def _set_existing(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = parse_key(key)
    container = _walk(data, tuple(parents))
    container[last] = value


def _set_creating(data: dict[str, Any], key: str, value: Any) -> None:
    set_path(data, ".".join(split_key(key)), value)


def dotted_keys(data: Any) -> list[str]:
    """Every key path of ``data`` (inner nodes and leaves), in document order."""
    return paths(data)


def _addressable_keys(data: Any, prefix: tuple[Part, ...] = ()) -> list[str]:
    """Every mapping key path of ``data``, written as a preset writes it (names with a dot in brackets)."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for name, value in data.items():
            path = (*prefix, str(name))
            found.append(format_key(path))
            found.extend(_addressable_keys(value, path))
    return found


def closest_keys(data: Any, key: str, count: int = 3) -> list[str]:
    """The dotted keys of ``data`` closest to ``key`` (any nested mapping: a catalog's names, a document's keys)."""
    return difflib.get_close_matches(key, dotted_keys(data), n=count, cutoff=0.5)


def closest_config_keys(data: Any, key: str, count: int = 3) -> list[str]:
    """The configuration keys of ``data`` closest to ``key``, written as a preset writes them, that change the same
    thing: a key inside ``ci_presets`` (a preset that edits another preset) is only compared with keys inside
    presets, any other key only with keys outside them (``tests.x.gpu`` is no fix for a wrong
    ``ci_presets.light["tests.x.gpu"]``: it would change the run instead)."""
    in_presets = _first_part(key) == PRESETS_KEY
    candidates = [candidate for candidate in _addressable_keys(data)
                  if (_first_part(candidate) == PRESETS_KEY) == in_presets]
    return difflib.get_close_matches(key, candidates, n=count, cutoff=0.5)


def _first_part(key: str) -> str:
    match = _NAME.match(key)
    return match.group() if match else ""


# --- references ------------------------------------------------------------------------------------------------------

REFERENCE_PREFIX = "@"
SECRET_PREFIX = "*$@"
INLINE_REFERENCE = re.compile(r"\{@([^{}\s]+)\}")
SECRETS_DIR_ENV_KEY = "secrets.dir.env_key"


class Config:
    """A configuration document addressed by keys (``a.b``, ``a.b[2]``, ``a["x.y"]``).

    ``get`` resolves references when a value is read: ``"@other.key"`` (the whole value), ``"text {@other.key}"``
    (inserted into the text) and ``"*$@name_key"`` (the content of the secret file named by ``name_key``, in the
    directory named by the environment variable ``secrets.dir.env_key`` names; registered with
    :mod:`pytest_topsail.redact`, so that no output shows it). ``set`` only changes keys that exist and is refused
    while frozen (inside a :class:`~pytest_topsail.parallel.Parallel` region).
    """

    def __init__(self, data: Mapping[str, Any], source: str = "<config>", directory: Path | None = None) -> None:
        self._data: dict[str, Any] = copy.deepcopy(dict(data))
        self.source = source
        self.directory = directory  # the suite's directory (its command_args.yaml.j2), if any
        self._frozen = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Config(source={self.source!r})"

    def __contains__(self, key: str) -> bool:
        return has_key(self._data, key)

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The value at ``key`` with references resolved (secret files read); ``default`` when missing (else an
        error)."""
        node = _walk(self._data, parse_key(key))
        if node is _MISSING:
            if default is not _MISSING:
                return default
            raise TopsailError(self._unknown_key_message(key))
        return self._resolve(node, key, read_secrets=True)

    def set(self, key: str, value: Any) -> None:
        """Replace the value of an existing key. New keys and changes while frozen are refused."""
        with self._lock:
            if self._frozen:
                raise TopsailError(f"{self.source}: cannot set {key!r} while the configuration is frozen "
                                   "(inside a Parallel region)")
            if not has_key(self._data, key):
                raise TopsailError(self._unknown_key_message(key))
            _set_existing(self._data, key, copy.deepcopy(value))

    def as_dict(self, resolve: bool = True, read_secrets: bool = False) -> dict[str, Any]:
        """A deep copy of the document: references resolved unless ``resolve=False``; secret-file references stay
        as written (``"*$@name_key"``, their name key checked) unless ``read_secrets=True``."""
        if resolve:
            resolved: dict[str, Any] = self._resolve(self._data, "", read_secrets=read_secrets)
            return resolved
        return copy.deepcopy(self._data)

    def keys(self) -> list[str]:
        return dotted_keys(self._data)

    @property
    def frozen(self) -> bool:
        return self._frozen > 0

    def freeze(self) -> None:
        with self._lock:
            self._frozen += 1

    def unfreeze(self) -> None:
        with self._lock:
            if self._frozen == 0:
                raise RuntimeError("Config.unfreeze() without a matching freeze()")
            self._frozen -= 1

    @contextmanager
    def frozen_region(self) -> Iterator[None]:
        self.freeze()
        try:
            yield
        finally:
            self.unfreeze()

    def _unknown_key_message(self, key: str) -> str:
        close = closest_config_keys(self._data, key)
        hint = f"; closest existing keys: {', '.join(close)}" if close else ""
        return f"{self.source}: unknown configuration key {key!r}{hint}"

    def _resolve(self, value: Any, here: str, chain: tuple[str, ...] = (), *, read_secrets: bool) -> Any:
        """``value`` (found at ``here``) with references resolved; ``chain``: the references followed."""
        if isinstance(value, str):
            return self._resolve_text(value, here, chain, read_secrets)
        if isinstance(value, Mapping):
            return {name: self._resolve(item, _child_key(here, str(name)), chain, read_secrets=read_secrets)
                    for name, item in value.items()}
        if isinstance(value, list):
            return [self._resolve(item, f"{here}[{index}]", chain, read_secrets=read_secrets)
                    for index, item in enumerate(value)]
        return value

    def _resolve_text(self, text: str, here: str, chain: tuple[str, ...], read_secrets: bool) -> Any:
        if text.startswith(SECRET_PREFIX) and len(text) > len(SECRET_PREFIX):
            file_name = self._follow(text[len(SECRET_PREFIX):], here, chain, read_secrets)
            return self._read_secret(file_name, here) if read_secrets else text
        if text.startswith(REFERENCE_PREFIX) and len(text) > len(REFERENCE_PREFIX):
            return self._follow(text[len(REFERENCE_PREFIX):], here, chain, read_secrets)
        if "{@" not in text:
            return text
        return INLINE_REFERENCE.sub(
            lambda match: _as_text(self._follow(match[1], here, chain, read_secrets)), text)

    def _follow(self, target: str, here: str, chain: tuple[str, ...], read_secrets: bool) -> Any:
        """The resolved value of the key ``target``, referenced from ``here``."""
        if target == here or target in chain:
            raise TopsailError(f"{self.source}: reference cycle: {' -> '.join([*chain, here, target])}")
        try:
            node = _walk(self._data, parse_key(target))
        except TopsailError:
            node = _MISSING
        if node is _MISSING:
            raise TopsailError(f"{self.source}: {here!r} refers to unknown key {target!r}")
        return self._resolve(node, target, (*chain, here), read_secrets=read_secrets)

    def _read_secret(self, file_name: Any, here: str) -> str:
        import os

        from pytest_topsail.redact import register_secret

        env_name = self.get(SECRETS_DIR_ENV_KEY, None)
        if not isinstance(env_name, str) or not env_name:
            raise TopsailError(f"{self.source}: {here!r} reads a secret file, but {SECRETS_DIR_ENV_KEY} (the name of "
                               "the environment variable holding the secrets directory) is not set")
        directory = os.environ.get(env_name)
        if not directory:
            raise TopsailError(f"{self.source}: {here!r} reads a secret file: the environment variable {env_name} "
                               f"(named by {SECRETS_DIR_ENV_KEY}) is not set")
        path = Path(directory) / str(file_name)
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise TopsailError(f"{self.source}: {here!r}: cannot read the secret file {path}: "
                               f"{exc.strerror or exc}") from None
        register_secret(secret)
        return secret


def _child_key(here: str, name: str) -> str:
    if not _PLAIN_NAME.fullmatch(name):
        return f'{here}["{name}"]'
    return f"{here}.{name}" if here else name


def _as_text(value: Any) -> str:
    """A value inserted into a text by ``{@key}``."""
    return value if isinstance(value, str) else str(value)


def current_config() -> Config | None:
    """The configuration of the suite whose test item is running in this context, if any."""
    return _current_config.get()


@contextmanager
def using_config(config: Config | None) -> Iterator[None]:
    token = _current_config.set(config)
    try:
        yield
    finally:
        _current_config.reset(token)


# --- presets ---------------------------------------------------------------------------------------------------------

VARIABLE_OVERRIDES_KEY = "variable_overrides"
# Keys of ci_presets that are TOPSAIL's bookkeeping, not presets: never listed, never applied by name.
BOOKKEEPING_KEYS = frozenset({TO_APPLY_KEY, "name", "names", VARIABLE_OVERRIDES_KEY})


def preset_names(presets: Mapping[str, Any]) -> list[str]:
    return [name for name in presets if name not in BOOKKEEPING_KEYS]


def preset_descriptions(presets: Mapping[str, Any]) -> dict[str, str]:
    """Each preset's ``description`` ("" when it has none)."""
    return {name: str(body.get(DESCRIPTION_KEY, "")) if isinstance(body, Mapping) else ""
            for name, body in presets.items() if name not in BOOKKEEPING_KEYS}


def _as_name_list(value: Any, what: str, source: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise TopsailError(f"{source}: {what} must be a preset name or a list of names, got {value!r}")


@contextmanager
def _with_presets(data: dict[str, Any], presets: dict[str, Any]) -> Iterator[None]:
    """``presets`` at ``data[ci_presets]`` while the block runs: preset keys may address them
    (``ci_presets.light["tests.x.gpu"]``), and what they change is what the next application of that preset sees."""
    data[PRESETS_KEY] = presets
    try:
        yield
    finally:
        data.pop(PRESETS_KEY, None)


def apply_presets(data: dict[str, Any], presets: dict[str, Any], names: list[str], source: str,
                  applied: list[str] | None = None) -> list[str]:
    """Apply ``names`` (with their ``extends``) to ``data`` in place; return the preset names applied in TOPSAIL's
    order: each once, recorded before its ``extends`` (``applied``: the list to extend, for successive calls).
    ``presets`` may be changed by a preset that edits another."""
    applied = [] if applied is None else applied
    with _with_presets(data, presets):
        for name in names:
            _apply_preset(data, presets, name, [], applied, source)
    return applied


def _apply_preset(data: dict[str, Any], presets: dict[str, Any], name: str, stack: list[str],
                  applied: list[str], source: str) -> None:
    if name in stack:
        raise TopsailError(f"{source}: preset cycle: {' -> '.join([*stack, name])}")
    where = f" (extended by preset {stack[-1]!r})" if stack else ""
    if name in BOOKKEEPING_KEYS:
        raise TopsailError(f"{source}: {PRESETS_KEY}.{name}{where} is TOPSAIL's bookkeeping, not a preset")
    if name not in presets:
        known = ", ".join(preset_names(presets)) or "none"
        raise TopsailError(f"{source}: unknown preset {name!r}{where}; presets defined: {known}")
    body = presets[name]
    if body is None or body == {}:
        raise TopsailError(f"{source}: preset {name!r} is empty (it sets no key and extends no preset)")
    if not isinstance(body, Mapping):
        raise TopsailError(f"{source}: preset {name!r} must be a mapping of keys to values, got {type(body).__name__}")
    if name not in applied:
        applied.append(name)
    for key, value in list(body.items()):
        if key == DESCRIPTION_KEY:
            if not isinstance(value, str):
                raise TopsailError(f"{source}: preset {name!r}: description must be text, got {value!r}")
            continue
        if key == EXTENDS_KEY:
            for parent in _as_name_list(value, f"preset {name!r}: extends", source):
                _apply_preset(data, presets, parent, [*stack, name], applied, source)
            continue
        _preset_set(data, name, key, value, source)


def _preset_set(data: dict[str, Any], name: str, key: Any, value: Any, source: str) -> None:
    if not isinstance(key, str):
        raise TopsailError(f"{source}: preset {name!r}: key {key!r} must be a string")
    try:
        exists = has_key(data, key)
    except TopsailError as exc:
        raise TopsailError(f"{source}: preset {name!r}: {exc}") from None
    if exists:
        _set_existing(data, key, copy.deepcopy(value))
    elif key in RESERVED_KEYS:
        _set_creating(data, key, copy.deepcopy(value))
    else:
        close = closest_config_keys(data, key)
        hint = f"; closest existing keys: {', '.join(close)}" if close else ""
        raise TopsailError(f"{source}: preset {name!r} sets {key!r}, which is not in the base configuration "
                           f"(presets may only change existing keys){hint}")


def apply_variable_overrides(data: dict[str, Any], presets: dict[str, Any], source: str) -> None:
    """``ci_presets.variable_overrides`` (key -> value): each key set, as TOPSAIL does after ``to_apply``."""
    overrides = presets.get(VARIABLE_OVERRIDES_KEY)
    if overrides is None:
        return
    where = f"{source}: {PRESETS_KEY}.{VARIABLE_OVERRIDES_KEY}"
    if not isinstance(overrides, Mapping):
        raise TopsailError(f"{where} must be a mapping of keys to values, got {type(overrides).__name__}")
    with _with_presets(data, presets):
        for key, value in overrides.items():
            if not isinstance(key, str) or not has_key(data, key):
                close = closest_config_keys(data, str(key))
                hint = f"; closest existing keys: {', '.join(close)}" if close else ""
                raise TopsailError(f"{where}: {key!r} is not in the base configuration{hint}")
            _set_existing(data, key, copy.deepcopy(value))


def apply_presets_and_overrides(document: dict[str, Any], presets: dict[str, Any], source: str, *,
                                requested: list[str], pr_overrides: list[tuple[str, Any]],
                                var_overrides: list[tuple[str, Any]]) -> list[str]:
    """Build the effective configuration in ``document`` (in place), in TOPSAIL's order: the presets of
    ``ci_presets.to_apply``, ``ci_presets.variable_overrides``, the PR's ``/var`` overrides, the presets requested
    (a PR's ``/test`` arguments, then ``--preset``; only those ``presets`` defines), the ``/var`` overrides again (they
    win over presets), then ``--var``. Returns the presets applied (see :func:`apply_presets`)."""
    to_apply = _as_name_list(presets.get(TO_APPLY_KEY), f"{PRESETS_KEY}.{TO_APPLY_KEY}", source)
    applied = apply_presets(document, presets, to_apply, source)
    apply_variable_overrides(document, presets, source)
    apply_vars(document, pr_overrides)
    wanted = [name for name in requested if name in preset_names(presets)]
    apply_presets(document, presets, wanted, source, applied)
    apply_vars(document, pr_overrides)
    apply_vars(document, var_overrides)
    return applied


# --- --var overrides -------------------------------------------------------------------------------------------------

def parse_var(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as YAML (an empty VALUE is null, as in YAML and TOPSAIL)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise TopsailError(f"--var {text!r}: expected KEY=VALUE, e.g. --var tests.scale.jobs=100")
    parse_key(key)
    return key, parse_value(raw, f"--var {text!r}")


def parse_value(raw: str, what: str) -> Any:
    """A value written by hand (``--var``, a PR's ``/var``), parsed as YAML; ``"@other.key"`` (a reference, which
    cannot start a plain YAML scalar) is taken as the string it is."""
    import yaml

    text = raw.strip()
    if text.startswith(REFERENCE_PREFIX):
        return text
    try:
        return parse_yaml(text) if text else None
    except yaml.YAMLError as exc:
        raise TopsailError(f"{what}: VALUE is not valid YAML: {_describe_yaml_error(exc)}") from None


def apply_vars(data: dict[str, Any], overrides: list[tuple[str, Any]]) -> list[str]:
    """Apply the overrides whose key exists in ``data``; return the keys applied."""
    applied = []
    for key, value in overrides:
        if has_key(data, key):
            _set_existing(data, key, copy.deepcopy(value))
            applied.append(key)
    return applied
