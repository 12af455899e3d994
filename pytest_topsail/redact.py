"""The one redaction rule of every output: saved config, --topsail-show-config, lts.json, item files, logs, KPI labels
(hence history, junit and the report).

A key is secret when one of its words (split at ``_ - .``, spaces and camelCase) is in :data:`SECRET_WORDS`, or when
its words joined end with one of them (``apikey``, ``accesskey``): ``pg_password``, ``aws_secret_access_key``,
``credentials``, ``passphrase``, ``authToken``; not ``max_new_tokens``, ``author`` or ``keep``. A key ending in ``_env``
names an environment variable, not its value, and is kept. Every non-empty value of a secret key is replaced, numbers
and booleans included, and so is every value anywhere below a secret key (``credentials: {user: .., pass: ..}``).
Credentials inside URLs (``https://user:pw@host``) are replaced in any string.

Kubernetes objects (:func:`redact_object`: manifests and objects saved by fixtures) follow the same name rule where
a value is named: Secret data, and environment variables ``{name: HF_TOKEN, value: ...}``.

Free text (:func:`redact_text`) has no keys: the name rule is not applied there (``inputTokenCount: expected 7`` is no
secret). It hides the values known to be secret (:func:`secret_values` of the configuration and the case), URL
credentials, ``Bearer``/``Basic`` credentials and ``Authorization`` values.

Values read from secret files (the configuration's ``*$@key`` references) are registered (:func:`register_secret`)
when read: every function here hides them wherever they appear, whatever the key above them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
SECRET_WORDS = frozenset({
    "password", "passwd", "pass", "pwd", "passphrase", "secret", "secrets", "token", "apikey", "key", "credential",
    "credentials", "creds", "auth", "authorization", "bearer", "cookie",
})
# Words joined without separators that still name a secret (``apikey``, ``awsaccesskey``).
_SECRET_SUFFIXES = ("apikey", "accesskey", "secretkey", "privatekey", "password", "passwd", "passphrase", "secret",
                    "token")
_NOT_SECRET_SUFFIX = "_env"
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s@'\"<>]+)@")
# In free text only what is certainly a credential: ``Bearer``/``Basic`` credentials and the value of an
# ``Authorization`` header or field (``Authorization: token abc``, ``"authorization": "abc"``).
_BEARER = re.compile(r"\b(?P<scheme>Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_AUTHORIZATION = re.compile(
    r"""(?P<name>\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?)"""
    r"""(?P<value>(?!<redacted>|(?:Bearer|Basic)\s+<redacted>)[^\s"',;}\]]+"""
    r"""(?:\s+(?!<redacted>)[A-Za-z0-9._~+/=-]{8,})?)""", re.IGNORECASE)
MIN_KNOWN_SECRET = 4  # shorter known values ("1", "yes") would blank out unrelated text
_registered: set[str] = set()  # the contents of secret files read by this process
_registered_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Hide ``value`` (the content of a secret file) in every output of this process from now on."""
    if value:
        with _registered_lock:
            _registered.add(value)


def hide_registered(text: str) -> str:
    """``text`` with every registered secret replaced (the whole text when it is one, however short)."""
    if not _registered:
        return text
    with _registered_lock:
        known = sorted(_registered, key=len, reverse=True)
    if text in known:
        return REDACTED
    for secret in known:
        if len(secret) >= MIN_KNOWN_SECRET:
            text = text.replace(secret, REDACTED)
    return text


def is_secret_key(key: Any) -> bool:
    """Whether values under ``key`` are secret (see the module documentation for the rule)."""
    if not isinstance(key, str) or key.lower().endswith(_NOT_SECRET_SUFFIX):
        return False
    words = [word for word in _WORD_SPLIT.split(_CAMEL.sub(r"\1_\2", key).lower()) if word]
    if SECRET_WORDS.intersection(words):
        return True
    return "".join(words).endswith(_SECRET_SUFFIXES)


def redact(data: Any) -> Any:
    """A copy of ``data`` (mappings, lists, scalars) with secret values and URL credentials replaced."""
    return _redact(data, under_secret=False)


def _redact(data: Any, under_secret: bool) -> Any:
    if isinstance(data, Mapping):
        return {key: _redact(value, under_secret or is_secret_key(key)) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_redact(item, under_secret) for item in data]
    if under_secret:
        return data if data is None or data == "" else REDACTED
    if isinstance(data, str):
        return redact_url_credentials(hide_registered(data))
    return data


def redact_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kubernetes object (a manifest, an object read back) safe to write: a Secret's ``data``/``stringData``
    values, the ``value`` of every environment variable whose name is secret (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``;
    ``valueFrom.secretKeyRef`` is a reference and stays) and URL credentials in any string. Nothing else is hidden:
    object fields are no free-form settings (``automountServiceAccountToken``, ``secretName`` are kept)."""
    clean = _redact_object(obj)
    if clean.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(clean.get(key), dict):
                clean[key] = {name: REDACTED for name in clean[key]}
    return clean


def _redact_object(data: Any) -> Any:
    if isinstance(data, Mapping):
        secret_env = isinstance(data.get("name"), str) and "value" in data and is_secret_key(data["name"])
        return {key: REDACTED if secret_env and key == "value" and data[key] not in (None, "")
                else _redact_object(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_redact_object(item) for item in data]
    return redact_url_credentials(hide_registered(data)) if isinstance(data, str) else data


def redact_url_credentials(text: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://<redacted>@host`` (a token may stand in the user part too)."""
    if "@" not in text:
        return text
    return _URL_USERINFO.sub(lambda match: f"{match['scheme']}{REDACTED}@", text)


def secret_values(*documents: Any) -> set[str]:
    """The values (as text) that :func:`redact` hides in ``documents``: to hide them in free text too, e.g. a failure
    message quoting a password read from the configuration."""
    found: set[str] = set()
    for document in documents:
        _collect(document, False, found)
    return {value for value in found if len(value) >= MIN_KNOWN_SECRET}


def _collect(data: Any, under_secret: bool, found: set[str]) -> None:
    if isinstance(data, Mapping):
        for key, value in data.items():
            _collect(value, under_secret or is_secret_key(key), found)
    elif isinstance(data, list | tuple):
        for item in data:
            _collect(item, under_secret, found)
    elif under_secret and data is not None and data != "":
        found.add(str(data))
    elif isinstance(data, str) and "@" in data:
        found.update(match["userinfo"].partition(":")[2] or match["userinfo"] for match in _URL_USERINFO.finditer(data))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Free text (logs, failure messages): the known ``secrets`` (see :func:`secret_values`), URL credentials,
    ``Bearer``/``Basic`` credentials and ``Authorization`` values. Nothing is guessed from names: a failure message
    such as ``inputTokenCount: expected 7, got 5`` is left whole."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = redact_url_credentials(hide_registered(text))
    text = _BEARER.sub(lambda match: f"{match['scheme']} {REDACTED}", text)
    return _AUTHORIZATION.sub(lambda match: f"{match['name']}{REDACTED}", text)
