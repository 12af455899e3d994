"""What crosses the wire of a resource request: request bodies in (JSON, YAML, protobuf; ``read_body``), answers out
(JSON bodies with fieldValidation warnings, ``kind: Status`` errors), the field manager a write is recorded under and
``limit``/``continue`` paging of lists."""

from __future__ import annotations

import base64
import functools
import json
import re
from typing import Any

import orjson
import yaml
from aiohttp import web
from aiohttp.http import HttpVersion11

from pytest_topsail.sim.api import protobuf
from pytest_topsail.sim.machinery import apierror, gojson
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.registry import fieldmanager
from pytest_topsail.sim.registry.schema import FIELD_VALIDATION, FieldValidation

JSON = "application/json"


def status_response(error: ApiError) -> web.Response:
    headers = {"Retry-After": "1"} if error.code in (429, 503, 504) else None
    return web.Response(status=error.code, body=error.body() + b"\n", content_type=JSON,
                        headers=headers)


def json_response(body: bytes | dict[str, Any], status: int = 200,
                  validation: FieldValidation | None = None) -> web.Response:
    if isinstance(body, dict):
        body = gojson.dumps(body)
    response = web.Response(status=status, body=body, content_type=JSON)
    for warning in validation.warnings if validation is not None else ():
        response.headers.add("Warning", f"299 - {json.dumps(warning)}")  # kubectl prints "Warning: <text>"
    return response


def field_validation(request: web.Request) -> FieldValidation:
    """The write's fieldValidation directive (Warn when absent, as kube-apiserver since 1.27); 400 if unknown."""
    directive = request.query.get("fieldValidation") or "Warn"
    if directive not in FIELD_VALIDATION:
        raise apierror.bad_request(f"fieldValidation parameter unsupported: {directive}")
    return FieldValidation(directive)


async def read_body(request: web.Request) -> Any:
    """The decoded body of a write (400 when empty, 415 for a media type the API does not take)."""
    raw = await request.read()
    if not raw:
        raise apierror.bad_request("the request body is empty")
    content_type = request.content_type
    if content_type.endswith("yaml"):
        return yaml.safe_load(raw.decode())
    if content_type == protobuf.PROTOBUF:
        return protobuf.decode_object(raw)
    if content_type != JSON and "Content-Type" in request.headers:  # no Content-Type: JSON, as the apiserver
        raise apierror.unsupported_media_type(content_type)
    return loads(raw)


def loads(raw: bytes) -> Any:
    """A JSON body, decoded by orjson (a few times faster). What orjson refuses (NaN, lone surrogates), malformed
    bodies and bodies that may hold an integer beyond 64 bits (orjson makes it a float) go to ``json``, whose
    results and error messages the API has always had."""
    # a run of 19 digits needs 19 digits in all: counting them is ten times cheaper than the search
    if len(raw) - len(raw.translate(None, _DIGITS)) < 19 or _LONG_DIGITS.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


_DIGITS = b"0123456789"
_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def request_manager(request: web.Request) -> str:
    """The field manager of a write: ``fieldManager``, else from the User-Agent (as the apiserver)."""
    return _manager_of(request.query.get("fieldManager"), request.headers.get("User-Agent", ""))


_manager_of = functools.lru_cache(maxsize=256)(fieldmanager.manager_from)  # a client sends the same one each time


def not_simulated(what: str) -> ApiError:
    """The answer for a part of the API the simulator leaves out on purpose (listed in docs/simulator.md)."""
    return ApiError(405, "MethodNotAllowed", f"{what} is not supported by the simulated cluster "
                                             "(pytest-topsail simulator): see docs/simulator.md for what it serves",
                    {"kind": what})


async def expect(request: web.Request) -> None:
    """``Expect: 100-continue`` (curl sends it before a large body), answered as an aiohttp application does."""
    value = request.headers["Expect"]
    if request.version == HttpVersion11:
        if value.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {value}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own size starts after it


def page(items: list[dict[str, Any]], limit: str | None, token: str | None,
         resource_version: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``limit``/``continue`` paging of a sorted list. Unlike the apiserver there is no snapshot: a continued page
    shows the objects as they are now, after the last (namespace, name) of the previous page."""
    metadata: dict[str, Any] = {"resourceVersion": resource_version}
    if token:
        try:
            start = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
            after = (str(start[0]), str(start[1]))
        except (ValueError, KeyError, TypeError, IndexError):
            raise apierror.bad_request("continue key is not valid") from None
        items = [obj for obj in items if _sort_key(obj) > after]
    if limit is not None:
        if not limit.isdigit():
            raise apierror.bad_request(f"invalid limit {limit!r}")
        count = int(limit)
        if 0 < count < len(items):
            last = _sort_key(items[count - 1])
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps({"start": last}).encode()).decode()
            metadata["remainingItemCount"] = len(items) - count
            items = items[:count]
    return items, metadata


def _sort_key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj["metadata"]
    return (metadata.get("namespace") or "", metadata["name"])
