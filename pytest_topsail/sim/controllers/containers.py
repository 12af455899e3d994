"""What a simulated container does, read from its command and the pod's annotations (pure functions).

The command is read as a tiny shell script: `sleep N` (seconds, or with an s/m/h/d suffix) adds to the run time,
`sleep infinity` and `tail -f /dev/null` run forever, `exit K` ends with code K, `false` ends with 1, `echo ...` and
`printf ...` write a log line. Anything else is ignored. A command with none of these says nothing: the pod
lifecycle then runs the container forever, or for the `complete` stage's delay when the pod belongs to a Job.
Annotations (prefix `sim.topsail.io/`) override: `duration-seconds` ("infinity" allowed), `exit-code`, `log`.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
from dataclasses import dataclass
from typing import Any

ANNOTATION_PREFIX = "sim.topsail.io/"
DURATION_ANNOTATION = ANNOTATION_PREFIX + "duration-seconds"
EXIT_CODE_ANNOTATION = ANNOTATION_PREFIX + "exit-code"
LOG_ANNOTATION = ANNOTATION_PREFIX + "log"
STAGE_NAMES = ("schedule", "initialize", "start", "ready", "complete")

SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
_SPLIT = re.compile(r"\n|;|&&|\|\|")
_DURATION = re.compile(r"^([0-9]*\.?[0-9]+)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class ContainerPlan:
    name: str
    duration: float | None  # seconds; math.inf runs forever; None: the command does not say
    exit_code: int
    log: str


def _script(argv: tuple[str, ...]) -> str:
    if not argv:
        return ""
    if os.path.basename(argv[0]) in SHELLS:
        rest = argv[1:]
        for index, arg in enumerate(rest):
            if arg.startswith("-") and "c" in arg[1:]:
                return " ".join(rest[index + 1:index + 2])
        return ""
    return shlex.join(argv)


def _sleep_seconds(arg: str) -> float | None:
    if arg in ("infinity", "inf"):
        return math.inf
    match = _DURATION.match(arg)
    if not match:
        return None
    return float(match.group(1)) * _UNIT[match.group(2)]


def plan_from_command(container: dict[str, Any]) -> ContainerPlan:
    words = [*(container.get("command") or ()), *(container.get("args") or ())]
    argv = tuple(str(word) for word in words)
    return _plan(str(container.get("name") or ""), argv)


@functools.lru_cache(maxsize=1024)  # pods of one Job or Deployment share their command: read it once
def _plan(name: str, argv: tuple[str, ...]) -> ContainerPlan:
    duration: float | None = None
    exit_code = 0
    lines: list[str] = []
    for statement in _SPLIT.split(_script(argv)):
        try:
            words = shlex.split(statement)
        except ValueError:
            words = statement.split()
        if not words:
            continue
        program, args = os.path.basename(words[0]), words[1:]
        if program == "sleep" and args:
            seconds = _sleep_seconds(args[0])
            if seconds is not None:
                duration = (duration or 0.0) + seconds
        elif program == "tail" and "-f" in args:
            duration = math.inf
        elif program == "exit":
            exit_code = _int(args[0] if args else "0", 1)
            duration = duration or 0.0
            break
        elif program == "false":
            exit_code = 1
            duration = duration or 0.0
            break
        elif program == "true":
            duration = duration or 0.0
        elif program == "echo":
            lines.append(" ".join(a for a in args if a not in ("-n", "-e")))
            duration = duration or 0.0
        elif program == "printf" and args:
            lines.append(args[0].replace("\\n", "\n").rstrip("\n"))
            duration = duration or 0.0
    log = "".join(line + "\n" for line in lines)
    return ContainerPlan(name, duration, exit_code, log)


def _int(text: str, default: int) -> int:
    try:
        return int(text) & 255
    except ValueError:
        return default


def plan_containers(pod: dict[str, Any]) -> list[ContainerPlan]:
    """The plan of each container of the pod, annotations applied."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    plans = []
    for container in (pod.get("spec") or {}).get("containers") or ():
        plan = plan_from_command(container)
        duration, exit_code, log = plan.duration, plan.exit_code, plan.log
        if DURATION_ANNOTATION in annotations:
            duration = _sleep_seconds(str(annotations[DURATION_ANNOTATION]).strip()) or 0.0
        if EXIT_CODE_ANNOTATION in annotations:
            exit_code = _int(str(annotations[EXIT_CODE_ANNOTATION]), 1)
            if duration is None:
                duration = 0.0
        if LOG_ANNOTATION in annotations:
            text = str(annotations[LOG_ANNOTATION])
            log += text if text.endswith("\n") else text + "\n"
        plans.append(ContainerPlan(plan.name, duration, exit_code, log))
    return plans


def stage_override(annotations: dict[str, str], stage: str) -> tuple[float | None, float | None]:
    """Per-pod (delay_ms, jitter_ms) from `sim.topsail.io/<stage>-delay-ms` / `-jitter-ms`; None when absent or bad."""
    return (
        _float(annotations.get(f"{ANNOTATION_PREFIX}{stage}-delay-ms")),
        _float(annotations.get(f"{ANNOTATION_PREFIX}{stage}-jitter-ms")),
    )


def _float(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 and math.isfinite(number) else None
