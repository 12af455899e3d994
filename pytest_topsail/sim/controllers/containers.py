"""What a simulated container does, read from its command and the pod's annotations (pure functions).

The command is read as a tiny shell script: `sleep N` (seconds, or with an s/m/h/d suffix) adds to the run time,
`sleep infinity` and `tail -f /dev/null` run forever, `exit K` ends with code K, `false` ends with 1, `echo ...` and
`printf ...` write a log line, and a `while true` / `while :` / `until false` loop runs forever (its body's lines are
logged once). Anything else is ignored. A command with none of these says nothing: the pod
lifecycle then runs the container forever, or for the `complete` stage's delay when the pod belongs to a Job.
Annotations (prefix `sim.topsail.io/`) override: `duration-seconds` ("infinity" allowed), `exit-code`, `log`.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ANNOTATION_PREFIX = "sim.topsail.io/"
DURATION_ANNOTATION = ANNOTATION_PREFIX + "duration-seconds"
EXIT_CODE_ANNOTATION = ANNOTATION_PREFIX + "exit-code"
LOG_ANNOTATION = ANNOTATION_PREFIX + "log"
ENDPOINT_ANNOTATION = ANNOTATION_PREFIX + "endpoint-"  # + container port: "127.0.0.1:PORT" (sim/streams/portforward.py)
STAGE_NAMES = ("schedule", "initialize", "start", "ready", "complete")

SHELLS = {"sh", "bash", "ash", "dash", "zsh"}
_SPLIT = re.compile(r"\n|;|&&|\|\|")
_DURATION = re.compile(r"^([0-9]*\.?[0-9]+)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_ENDLESS_LOOP = re.compile(r"^(while\s+(true|:|\[\s*1\s*\]|\[\s*true\s*\])|until\s+false)$")
_KEYWORDS = {"do", "then", "else"}  # a statement may start with one: `do echo x`
_CONTROL = {"while", "until", "for", "if", "elif", "done", "fi"}


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
    endless = False
    for statement in _SPLIT.split(_script(argv)):
        if _ENDLESS_LOOP.match(statement.strip()):
            endless = True
            continue
        try:
            words = shlex.split(statement)
        except ValueError:
            words = statement.split()
        while words and words[0] in _KEYWORDS:
            words = words[1:]
        if not words or words[0] in _CONTROL:
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
    if endless and exit_code == 0:
        duration = math.inf  # runs until the pod is deleted, never completes nor restarts
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


# ----------------------------------------------------------------- exec: one command run in a simulated container
STDOUT, STDERR = 1, 2


@dataclass(frozen=True)
class ExecResult:
    output: tuple[tuple[float, int, str], ...]  # (seconds after the start, STDOUT or STDERR, text), in order
    exit_code: int
    seconds: float  # how long the command's `sleep`s make it run

    def text(self, stream: int) -> str:
        return "".join(text for _, where, text in self.output if where == stream)


EXEC_PROGRAMS = {"echo", "printf", "env", "printenv", "true", "false", "exit", "sleep", "hostname", "pwd", "export",
                 ":", "ls"}
ROOT_LISTING = "".join(f"{name}\n" for name in ("bin", "dev", "etc", "home", "lib", "proc", "root", "run", "sys",
                                                 "tmp", "usr", "var"))
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*|\?))")
_REDIRECTIONS = {">&2": (STDOUT, STDERR), "1>&2": (STDOUT, STDERR), "2>&1": (STDERR, STDOUT),
                 ">/dev/null": (STDOUT, 0), "1>/dev/null": (STDOUT, 0), "2>/dev/null": (STDERR, 0)}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAX_LOOP_ITERATIONS = 10_000  # an exec'd endless loop is cut there (its output is sent at its time anyway)
MAX_LOOP_SECONDS = 3600.0


Program = Callable[[list[str]], tuple[str, str, int]]  # args -> (stdout, stderr, exit code)


def run_exec(argv: list[str], env: dict[str, str], programs: dict[str, Program] | None = None) -> ExecResult | None:
    """Run `argv` as `kubectl exec` would in the container: a shell (`sh -c SCRIPT`) runs the mini-shell's
    statements (`;`, `&&`, `||`, `$VAR` expansion, echo, printf, env, printenv, exit, sleep, ...); a lone
    program runs when the mini-shell knows it. None when the program does not exist in a simulated container."""
    if not argv:
        return None
    program = os.path.basename(argv[0])
    state = _ShellState(dict(env), programs=programs or {})
    if program in SHELLS:
        state.run_script(_script(tuple(argv)))
    elif program in EXEC_PROGRAMS or program in state.programs:
        state.run(argv, shell=False)
    else:
        return None
    return ExecResult(tuple(state.output), state.status, state.seconds)


@dataclass
class _ShellState:
    env: dict[str, str]
    status: int = 0
    seconds: float = 0.0
    exited: bool = False
    output: list[tuple[float, int, str]] = field(default_factory=list)
    programs: dict[str, Program] = field(default_factory=dict)  # what this container has besides the builtins

    redirect: dict[int, int] = field(default_factory=dict)  # of the running command: stream -> stream, 0 = discard

    def write(self, stream: int, text: str) -> None:
        stream = self.redirect.get(stream, stream)
        if stream:
            self.output.append((self.seconds, stream, text))

    def run_script(self, script: str) -> None:
        self.run_statements(_statements(script))

    def run_statements(self, statements: list[tuple[str, str]]) -> None:
        index = 0
        while index < len(statements) and not self.exited:
            separator, statement = statements[index]
            index += 1
            if (separator == "&&" and self.status != 0) or (separator == "||" and self.status == 0):
                continue
            head = statement.strip().split(maxsplit=1)
            if head and head[0] in ("for", "while", "until"):
                body, index = _loop_body(statements, index)
                if body is None:
                    self.write(STDERR, f"sh: syntax error: '{head[0]}' without 'do ... done'\n")
                    self.status, self.exited = 2, True
                    return
                self.run_loop(head[0], head[1] if len(head) > 1 else "", body)
                continue
            self.run_statement(statement)

    def run_statement(self, statement: str) -> None:
        try:
            words = shlex.split(self._expand(statement))
        except ValueError as error:
            self.write(STDERR, f"sh: syntax error: {error}\n")
            self.status, self.exited = 2, True
            return
        if words:
            self.run(words, shell=True)

    def run_loop(self, keyword: str, condition: str, body: list[tuple[str, str]]) -> None:
        """`for NAME in WORDS`, `while COND`, `until COND`; an endless loop stops after MAX_LOOP_ITERATIONS or
        MAX_LOOP_SECONDS of sleeps (exec sends the output at its time: the client has left long before)."""
        if keyword == "for":
            name, _, words = condition.partition(" in ")
            for value in shlex.split(self._expand(words)):
                self.env[name.strip()] = value
                self.run_statements(body)
                if self.exited:
                    return
            return
        for _ in range(MAX_LOOP_ITERATIONS):
            self.run_statement(condition)
            if self.exited or (self.status != 0) == (keyword == "while") or self.seconds > MAX_LOOP_SECONDS:
                self.status = 0
                return
            self.run_statements(body)

    def _expand(self, statement: str) -> str:
        """$VAR, ${VAR} and $? outside single quotes; the values are quoted so that they stay one word."""
        pieces = re.split(r"('[^']*')", statement)
        for index in range(0, len(pieces), 2):
            pieces[index] = _VARIABLE.sub(self._value, pieces[index])
        return "".join(pieces)

    def _value(self, match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        value = str(self.status) if name == "?" else self.env.get(name, "")
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")

    def run(self, words: list[str], shell: bool) -> None:
        while shell and words and _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            self.env[name] = value
        self.redirect = {}
        for word in [w for w in words if w in _REDIRECTIONS]:
            source, target = _REDIRECTIONS[word]
            self.redirect[source] = target
            words.remove(word)
        if not words:
            self.status = 0
            return
        program, args = os.path.basename(words[0]), words[1:]
        self.status = 0
        if program == "echo":
            newline = "-n" not in args
            self.write(STDOUT, " ".join(a for a in args if a not in ("-n", "-e")) + ("\n" if newline else ""))
        elif program == "printf" and args:
            self.write(STDOUT, _printf(args[0], args[1:]))
        elif program == "env":
            self.write(STDOUT, "".join(f"{k}={v}\n" for k, v in self.env.items()))
        elif program == "printenv":
            names = args or list(self.env)
            self.write(STDOUT, "".join((f"{n}={self.env[n]}\n" if not args else f"{self.env[n]}\n")
                                       for n in names if n in self.env))
            self.status = 0 if all(n in self.env for n in names) else 1
        elif program in ("export", "true", ":"):
            for arg in args:
                name, equals, value = arg.partition("=")
                if equals:
                    self.env[name] = value
        elif program == "false":
            self.status = 1
        elif program == "exit":
            self.status, self.exited = _int(args[0] if args else "0", 2), True
        elif program == "sleep":
            seconds = _sleep_seconds(args[0]) if args else None
            if seconds is None:
                self.write(STDERR, f"sleep: invalid time interval '{args[0] if args else ''}'\n")
                self.status = 1
            else:
                self.seconds += seconds
        elif program == "hostname":
            self.write(STDOUT, self.env.get("HOSTNAME", "") + "\n")
        elif program == "pwd":
            self.write(STDOUT, "/\n")
        elif program == "ls":
            self.write(STDOUT, "" if args and args[-1] not in ("/", "-l") else ROOT_LISTING)
        elif program in self.programs:
            out, err, self.status = self.programs[program](args)
            self.write(STDOUT, out)
            self.write(STDERR, err)
        else:
            self.write(STDERR, f"sh: {words[0]}: not found\n")
            self.status = 127


def _loop_body(statements: list[tuple[str, str]], start: int) -> tuple[list[tuple[str, str]] | None, int]:
    """The statements between `do` and the matching `done` from `start`, and the index after `done`."""
    depth = 0
    body: list[tuple[str, str]] = []
    for index in range(start, len(statements)):
        separator, statement = statements[index]
        words = statement.strip().split(maxsplit=1)
        if not body and depth == 0:
            if not words or words[0] != "do":
                return None, index
            statement = words[1] if len(words) > 1 else ""
            words = statement.split(maxsplit=1)
        if words and words[0] in ("for", "while", "until"):
            depth += 1
        elif words and words[0] == "done":
            if depth == 0:
                return body, index + 1
            depth -= 1
        body.append((separator, statement))
    return None, len(statements)


def _statements(script: str) -> list[tuple[str, str]]:
    """(separator before, statement) pairs of a script split on `;`, newlines, `&&` and `||` outside quotes."""
    result: list[tuple[str, str]] = []
    separator, quote, index = ";", "", 0
    current: list[str] = []
    while index < len(script):
        char = script[index]
        pair = script[index:index + 2]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in ";\n" or pair in ("&&", "||"):
            result.append((separator, "".join(current)))
            separator, current = (pair, []) if pair in ("&&", "||") else (";", [])
            index += len(separator) if separator != ";" else 1
            continue
        current.append(char)
        index += 1
    result.append((separator, "".join(current)))
    return result


def _printf(template: str, args: list[str]) -> str:
    text = template.replace("\\n", "\n").replace("\\t", "\t")
    values = iter(args)
    return re.sub(r"%[sd]", lambda _match: next(values, ""), text)
