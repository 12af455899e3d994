"""Kubernetes API errors raised by the store and rendered by the server as ``kind: Status`` bodies."""

from __future__ import annotations

from typing import Any

from pytest_topsail.sim.machinery import gojson


class ApiError(Exception):
    """An error a real apiserver would return: HTTP ``code``, machine ``reason`` and human ``message``."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> dict[str, Any]:
        """The ``kind: Status`` body for this error, its keys in the order of the apiserver's (metav1.Status)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            body["details"] = ordered_details(self.details)
        body["code"] = self.code
        return body

    def body(self) -> bytes:
        """The Status as the apiserver writes it: compact JSON in Go's encoding (sim/machinery/gojson.py)."""
        return gojson.dumps(self.status())


# metav1.StatusDetails and metav1.StatusCause field order (Go's encoding/json writes struct fields in order).
_DETAIL_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
_CAUSE_ORDER = ("reason", "message", "field")


def ordered_details(details: dict[str, Any]) -> dict[str, Any]:
    ordered = {key: details[key] for key in _DETAIL_ORDER if details.get(key) not in (None, "", [])}
    if "causes" in ordered:
        ordered["causes"] = [{key: cause[key] for key in _CAUSE_ORDER if cause.get(key)} for cause in ordered["causes"]]
    ordered.update((key, value) for key, value in details.items() if key not in ordered and key not in _DETAIL_ORDER)
    return ordered


def _details(kind: str, group: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if group:
        details["group"] = group
    if name:
        details["name"] = name
    return details


def _qualified(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', _details(plural, group, name))


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists', _details(plural, group, name)
    )


def conflict(plural: str, group: str, name: str, why: str = "") -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}',
        _details(plural, group, name),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are (field, message) pairs."""
    text = ", ".join(f"{field}: {message}" for field, message in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details = _details(kind, group, name)
    details["causes"] = [{"reason": _cause_reason(m), "message": m, "field": f} for f, m in causes]
    return ApiError(422, "Invalid", f'{_qualified(kind, group)} "{name or ""}" is invalid: {text}', details)


_CAUSE_REASONS = {"Forbidden": "FieldValueForbidden", "Required value": "FieldValueRequired",
                  "Unsupported value": "FieldValueNotSupported", "Duplicate value": "FieldValueDuplicate"}


def _cause_reason(message: str) -> str:
    """The cause reason that goes with a field error message ("Forbidden: ..." -> FieldValueForbidden)."""
    return next((reason for prefix, reason in _CAUSE_REASONS.items() if message.startswith(prefix)),
                "FieldValueInvalid")


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)
