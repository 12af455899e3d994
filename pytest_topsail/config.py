"""The configuration document of a suite: dotted keys, ``@references``, presets, ``--var`` overrides, freezing.

TOPSAIL semantics, without its weaknesses: presets are applied key by key in YAML order, ``extends`` at its position,
whole dict/list values replace wholesale, only existing keys may be set; cycles and unknown keys are reported as
:class:`~pytest_topsail.errors.TopsailError` naming the preset, key and file.
"""

from __future__ import annotations

import contextvars
import copy
import difflib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.tree import has_path, paths, set_path
from pytest_topsail.yamlparse import parse_yaml

PRESETS_KEY = "ci_presets"
TO_APPLY_KEY = "to_apply"
EXTENDS_KEY = "extends"
DESCRIPTION_KEY = "description"  # a preset's one-line description (what it runs, how long): shown, never applied
# Keys a preset may set even when the base configuration does not define them.
RESERVED_KEYS = frozenset({"cases"})
REFERENCE_PREFIX = "@"
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


def split_key(key: str) -> list[str]:
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise TopsailError(f"invalid configuration key {key!r}: expected dotted names like 'tests.scale.jobs'")
    return key.split(".")



def closest_keys(data: Any, key: str, count: int = 3) -> list[str]:
    return difflib.get_close_matches(key, dotted_keys(data), n=count, cutoff=0.5)


def has_key(data: Any, key: str) -> bool:
    split_key(key)
    return has_path(data, key)


def dotted_keys(data: Any) -> list[str]:
    """Every key path of ``data`` (inner nodes and leaves), in document order."""
    return paths(data)


def _set_existing(data: dict[str, Any], key: str, value: Any) -> None:
    split_key(key)
    set_path(data, key, value, create=False)


def _set_creating(data: dict[str, Any], key: str, value: Any) -> None:
    split_key(key)
    set_path(data, key, value)




class Config:
    """A configuration document addressed by dotted keys.

    ``get`` resolves ``"@other.key"`` references; ``set`` only changes keys that exist and is refused while frozen
    (inside a :class:`~pytest_topsail.parallel.Parallel` region).
    """

    def __init__(self, data: Mapping[str, Any], source: str = "<config>") -> None:
        self._data: dict[str, Any] = copy.deepcopy(dict(data))
        self.source = source
        self._frozen = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Config(source={self.source!r})"

    def __contains__(self, key: str) -> bool:
        return has_key(self._data, key)

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The value at dotted ``key`` with references resolved; ``default`` when missing (else an error)."""
        node: Any = self._data
        for part in split_key(key):
            if not isinstance(node, Mapping) or part not in node:
                if default is not _MISSING:
                    return default
                raise TopsailError(self._unknown_key_message(key))
            node = node[part]
        return self._resolve(node, key)

    def set(self, key: str, value: Any) -> None:
        """Replace the value of an existing key. New keys and changes while frozen are refused."""
        with self._lock:
            if self._frozen:
                raise TopsailError(f"{self.source}: cannot set {key!r} while the configuration is frozen "
                                   "(inside a Parallel region)")
            if not has_key(self._data, key):
                raise TopsailError(self._unknown_key_message(key))
            _set_existing(self._data, key, copy.deepcopy(value))

    def as_dict(self, resolve: bool = True) -> dict[str, Any]:
        """A deep copy of the document (references resolved unless ``resolve=False``)."""
        if resolve:
            return self._resolve(self._data, "")
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
        close = closest_keys(self._data, key)
        hint = f"; closest existing keys: {', '.join(close)}" if close else ""
        return f"{self.source}: unknown configuration key {key!r}{hint}"

    def _resolve(self, value: Any, here: str, chain: tuple[str, ...] = ()) -> Any:
        """``value`` (found at dotted key ``here``) with references resolved; ``chain``: the references followed."""
        if isinstance(value, str) and value.startswith(REFERENCE_PREFIX) and len(value) > 1:
            target = value[len(REFERENCE_PREFIX):]
            if target == here or target in chain:
                raise TopsailError(f"{self.source}: reference cycle: {' -> '.join([*chain, here, target])}")
            node: Any = self._data
            for part in target.split("."):
                if not isinstance(node, Mapping) or part not in node:
                    raise TopsailError(f"{self.source}: {here!r} refers to unknown key {target!r}")
                node = node[part]
            return self._resolve(node, target, (*chain, here))
        if isinstance(value, Mapping):
            return {name: self._resolve(item, f"{here}.{name}" if here else str(name), chain)
                    for name, item in value.items()}
        if isinstance(value, list):
            return [self._resolve(item, f"{here}[{index}]", chain) for index, item in enumerate(value)]
        return value


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

def preset_names(presets: Mapping[str, Any]) -> list[str]:
    return [name for name in presets if name != TO_APPLY_KEY]


def preset_descriptions(presets: Mapping[str, Any]) -> dict[str, str]:
    """Each preset's ``description`` ("" when it has none)."""
    return {name: str(body.get(DESCRIPTION_KEY, "")) if isinstance(body, Mapping) else ""
            for name, body in presets.items() if name != TO_APPLY_KEY}


def _as_name_list(value: Any, what: str, source: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise TopsailError(f"{source}: {what} must be a preset name or a list of names, got {value!r}")


def apply_presets(data: dict[str, Any], presets: Mapping[str, Any], names: list[str], source: str) -> list[str]:
    """Apply ``names`` (with their ``extends``) to ``data`` in place; return the preset names applied, in order."""
    applied: list[str] = []
    for name in names:
        _apply_preset(data, presets, name, [], applied, source)
    return applied


def _apply_preset(data: dict[str, Any], presets: Mapping[str, Any], name: str, stack: list[str],
                  applied: list[str], source: str) -> None:
    if name in stack:
        raise TopsailError(f"{source}: preset cycle: {' -> '.join([*stack, name])}")
    if name not in presets or name == TO_APPLY_KEY:
        where = f" (extended by preset {stack[-1]!r})" if stack else ""
        known = ", ".join(preset_names(presets)) or "none"
        raise TopsailError(f"{source}: unknown preset {name!r}{where}; presets defined: {known}")
    body = presets[name]
    if body is None or body == {}:
        raise TopsailError(f"{source}: preset {name!r} is empty (it sets no key and extends no preset)")
    if not isinstance(body, Mapping):
        raise TopsailError(f"{source}: preset {name!r} must be a mapping of keys to values, got {type(body).__name__}")
    for key, value in body.items():
        if key == DESCRIPTION_KEY:
            if not isinstance(value, str):
                raise TopsailError(f"{source}: preset {name!r}: description must be text, got {value!r}")
            continue
        if key == EXTENDS_KEY:
            for parent in _as_name_list(value, f"preset {name!r}: extends", source):
                _apply_preset(data, presets, parent, [*stack, name], applied, source)
            continue
        if not isinstance(key, str):
            raise TopsailError(f"{source}: preset {name!r}: key {key!r} must be a string")
        if has_key(data, key):
            _set_existing(data, key, copy.deepcopy(value))
        elif key in RESERVED_KEYS:
            _set_creating(data, key, copy.deepcopy(value))
        else:
            close = closest_keys(data, key)
            hint = f"; closest existing keys: {', '.join(close)}" if close else ""
            raise TopsailError(f"{source}: preset {name!r} sets {key!r}, which is not in the base configuration "
                               f"(presets may only change existing keys){hint}")
    applied.append(name)


# --- --var overrides -------------------------------------------------------------------------------------------------

def parse_var(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as YAML."""
    import yaml

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise TopsailError(f"--var {text!r}: expected KEY=VALUE, e.g. --var tests.scale.jobs=100")
    split_key(key)
    try:
        # "@other.key" (a reference) cannot start a plain YAML scalar: taken as the string it is
        value = raw.strip() if raw.strip().startswith(REFERENCE_PREFIX) else parse_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise TopsailError(f"--var {text!r}: VALUE is not valid YAML: {_describe_yaml_error(exc)}") from None
    return key, value


def apply_vars(data: dict[str, Any], overrides: list[tuple[str, Any]]) -> list[str]:
    """Apply the overrides whose key exists in ``data``; return the keys applied."""
    applied = []
    for key, value in overrides:
        if has_key(data, key):
            _set_existing(data, key, copy.deepcopy(value))
            applied.append(key)
    return applied
