"""List and watch options as the apiserver validates and reads them: resourceVersion, resourceVersionMatch,
sendInitialEvents (422 Invalid ``ListOptions.meta.k8s.io``), and the 504 for a resourceVersion not reached yet."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_topsail.sim.machinery import apierror
from pytest_topsail.sim.machinery.apierror import ApiError

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"


def check_list_options(query: Mapping[str, str], watch: bool) -> None:
    """422 Invalid with the apiserver's field errors for a forbidden combination of list/watch options."""
    match = query.get("resourceVersionMatch", "")
    resource_version = query.get("resourceVersion", "")
    send_initial = query.get("sendInitialEvents")
    causes: list[tuple[str, str]] = []
    if watch:
        if send_initial is not None and match != NOT_OLDER_THAN:
            causes.append(("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting "
                                                   f"resourceVersionMatch to {NOT_OLDER_THAN}"))
        if match:
            if send_initial is None:
                causes.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for watch "
                                                       "unless sendInitialEvents is provided"))
            if match != NOT_OLDER_THAN:
                causes.append(("resourceVersionMatch", f'Unsupported value: "{match}": supported values: '
                                                       f'"{NOT_OLDER_THAN}"'))
    else:
        if match:
            if not resource_version:
                causes.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless "
                                                       "resourceVersion is provided"))
            if query.get("continue"):
                causes.append(("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when continue "
                                                       "is provided"))
            if match == EXACT and resource_version == "0":
                causes.append(("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is forbidden for '
                                                       'resourceVersion "0"'))
            elif match not in (EXACT, NOT_OLDER_THAN):
                causes.append(("resourceVersionMatch", f'Unsupported value: "{match}": supported values: '
                                                       f'"{EXACT}", "{NOT_OLDER_THAN}", ""'))
        if send_initial is not None:
            causes.append(("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
    if causes:
        raise apierror.invalid("ListOptions", "meta.k8s.io", "", causes)


def requested_version(query: Mapping[str, str]) -> int | None:
    """The resourceVersion a read asks for, None for "any" ("" or "0"); 400 when it is not a number."""
    text = query.get("resourceVersion", "")
    if text in ("", "0"):
        return None
    if not text.isdigit():
        raise apierror.bad_request(f"invalid resourceVersion {text!r}")
    return int(text)


def too_large(wanted: int, current: int) -> ApiError:
    """504 for a resourceVersion the store has not reached within the wait."""
    return ApiError(504, "Timeout", f"Too large resource version: {wanted}, current: {current}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": 1})
