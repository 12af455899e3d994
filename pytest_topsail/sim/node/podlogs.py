"""``pods/{name}/log`` options as the kubelet applies them: ``previous``, ``timestamps``, ``sinceSeconds`` /
``sinceTime``, ``tailLines``, ``limitBytes`` (``follow`` and ``container`` are the server's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pytest_topsail.sim.machinery import apierror


@dataclass(frozen=True)
class LogOptions:
    previous: bool = False
    timestamps: bool = False
    since: float | None = None  # epoch seconds: lines written before are left out
    tail_lines: int | None = None
    limit_bytes: int | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str], pod: str, now: float) -> LogOptions:
        """The options of a log request; 400 for a value that is not a number or time, 422 for one out of range
        (as PodLogOptions validation)."""
        numbers = {key: _integer(query, key) for key in ("sinceSeconds", "tailLines", "limitBytes")}
        causes = []
        for key, minimum in (("sinceSeconds", 1), ("tailLines", 0), ("limitBytes", 1)):
            value = numbers[key]
            if value is not None and value < minimum:
                bound = "greater than 0" if minimum else "greater than or equal to 0"
                causes.append((key, f"Invalid value: {value}: must be {bound}"))
        since = None
        if "sinceTime" in query:
            since = _time(query["sinceTime"])
            if numbers["sinceSeconds"] is not None:
                causes.append(("sinceTime", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be "
                                            "specified"))
        if causes:
            raise apierror.invalid("PodLogOptions", "", pod, causes)
        if numbers["sinceSeconds"] is not None:
            since = now - numbers["sinceSeconds"]
        return cls(previous=query.get("previous") == "true", timestamps=query.get("timestamps") == "true",
                   since=since, tail_lines=numbers["tailLines"], limit_bytes=numbers["limitBytes"])

    def render(self, lines: list[tuple[float, str]]) -> str:
        """The text answered for these (epoch seconds, line) entries."""
        if self.since is not None:
            lines = [entry for entry in lines if entry[0] >= self.since]
        if self.tail_lines is not None:
            lines = lines[len(lines) - self.tail_lines:] if self.tail_lines else []
        text = "".join(self.format(entry) for entry in lines)
        return text if self.limit_bytes is None else text.encode()[:self.limit_bytes].decode(errors="ignore")

    def format(self, entry: tuple[float, str]) -> str:
        when, line = entry
        if not self.timestamps:
            return line
        stamp = datetime.fromtimestamp(when, UTC)
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond:06d}000Z " + line


def _integer(query: Mapping[str, str], key: str) -> int | None:
    text = query.get(key)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise apierror.bad_request(f"{key}: invalid value {text!r}: must be an integer") from None


def _time(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise apierror.bad_request(f"sinceTime: invalid value {text!r}: must be an RFC 3339 time") from None
