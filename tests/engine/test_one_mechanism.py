"""One mechanism per concern, checked on the source of pytest_topsail/, fixtures/ and suites/ (read with ast):

- every wait with a time limit goes through `pytest_topsail.waiting` (`poll`, `Deadline`, `Every`; the cluster's
  flavour is `kube.wait.poll`): no loop keeps a deadline of its own, i.e. compares a clock reading
  (``time.monotonic()``, ``time.time()``, ``time.perf_counter()``, an event loop's ``time()``) or an instant taken
  from one, or computes the time left to such an instant;
- every YAML file a user writes is read by `parse_yaml` (a key given twice is an error), never ``yaml.safe_load``.

A failure names file:line. The exceptions are listed below, each with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("pytest_topsail", "fixtures", "suites")

# (file, function): loops on a clock that are no wait
NOT_WAITS = {
    ("pytest_topsail/waiting.py", "*"): "the one helper itself",
    ("pytest_topsail/llmload/generator.py", "open_loop"): "the load schedule: when each request is sent (rate, "
                                                          "poisson), not a wait for something",
    ("pytest_topsail/prepare/download.py", "copy_stream"): "a progress line every 5 s of a copy; the download pod's "
                                                          "program runs alone (standard library only)",
    ("pytest_topsail/sim/controllers/pods.py", "_write_due_logs"): "the simulator's timeline of a pod's log lines "
                                                                   "(a scheduler on the event loop's clock)",
}
# (file, function): yaml.safe_load / safe_load_all of files that are no user's
NOT_USER_YAML = {
    ("pytest_topsail/yamlparse.py", "*"): "parse_yaml itself",
    ("pytest_topsail/tgis/latency.py", "coefficients"): "latency.yaml, the package's own data",
    ("pytest_topsail/tgis/catalog.py", "builtin_catalog"): "catalog.yaml, the package's own data",
    ("pytest_topsail/tgis/recording.py", "record_expectation"): "re-reads the text it just wrote, to check the splice",
    ("pytest_topsail/templates.py", "write_command_args"): "command_args.yaml, a file the run itself writes",
    ("pytest_topsail/prepare/olm.py", "render"): "manifests rendered from the package's own templates, several "
                                                 "documents a file",
    ("pytest_topsail/sim/api/messages.py", "read_body"): "a request body of the simulated API server (decoded as the "
                                                         "apiserver does, not a file)",
    ("pytest_topsail/sim/api/server.py", "_patch"): "a patch request body of the simulated API server",
    ("pytest_topsail/sim/api/server.py", "_scale"): "a scale request body of the simulated API server",
    ("pytest_topsail/sim/run/launcher.py", "_wait_ready"): "the kubeconfig the simulator itself wrote",
}
CLOCKS = {("time", "monotonic"), ("time", "time"), ("time", "perf_counter"), ("loop", "time")}


def is_clock(node: ast.AST) -> bool:
    """A reading of a clock: ``time.monotonic()``, ``loop.time()``, ``asyncio.get_running_loop().time()``, ..."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    owner, attr = node.func.value, node.func.attr
    if isinstance(owner, ast.Name):
        return (owner.id, attr) in CLOCKS
    return attr == "time" and isinstance(owner, ast.Call) and getattr(owner.func, "attr", "") in (
        "get_running_loop", "get_event_loop")


def reads_clock(node: ast.AST, names: AbstractSet[str] = frozenset()) -> bool:
    return any(is_clock(child) or (isinstance(child, ast.Name) and child.id in names)
               or (isinstance(child, ast.Attribute) and child.attr in names) for child in ast.walk(node))


def target_names(target: ast.AST) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Attribute):
        yield target.attr
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from target_names(element)


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    yield from (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))


def deadline_loops(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(function, line) of each loop that keeps a deadline by hand: in the loop, a comparison with a clock reading
    or a name set from one (``now``, ``started``, ``deadline``), or an instant ahead minus a clock reading (the time
    left)."""
    for function in functions(tree):
        clocked: set[str] = set()  # names set from a clock reading
        ahead: set[str] = set()  # names set to a clock reading plus something: an instant ahead
        for node in ast.walk(function):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
                if reads_clock(node.value):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = {name for target in targets for name in target_names(target)}
                    clocked |= names
                    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and reads_clock(n)
                           for n in ast.walk(node.value)):
                        ahead |= names
        for loop in ast.walk(function):
            if not isinstance(loop, ast.While | ast.For | ast.AsyncFor):
                continue
            for node in ast.walk(loop):
                if isinstance(node, ast.Compare) and not all(isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn)
                                                             for op in node.ops):
                    if any(reads_clock(side, clocked) for side in (node.left, *node.comparators)):
                        yield function.name, loop.lineno
                        break
                if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and reads_clock(node.left, ahead)
                        and reads_clock(node.right)):
                    yield function.name, loop.lineno
                    break


def yaml_loads(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(function, line) of each ``yaml.safe_load``/``load``/``safe_load_all``/``full_load`` call."""
    loads = {"safe_load", "load", "safe_load_all", "load_all", "full_load", "unsafe_load"}
    for function in functions(tree):
        for node in ast.walk(function):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in loads
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "yaml"):
                yield function.name, node.lineno
    for node in getattr(tree, "body", []):  # module level
        for child in ast.walk(node):
            if (not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                    and isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in loads and getattr(child.func.value, "id", "") == "yaml"):
                yield "<module>", child.lineno


def sources() -> Iterator[tuple[str, ast.AST]]:
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if "generation_pb2" not in path.name:
                yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def excused(allowed: dict[tuple[str, str], str], file: str, function: str) -> bool:
    return (file, function) in allowed or (file, "*") in allowed


def found(check: Callable[[ast.AST], Iterator[tuple[str, int]]], allowed: dict[tuple[str, str], str]) -> list[str]:
    return sorted({f"{file}:{line} ({function})" for file, tree in sources() for function, line in check(tree)
                   if not excused(allowed, file, function)})


def test_no_loop_keeps_a_deadline_of_its_own() -> None:
    assert found(deadline_loops, NOT_WAITS) == [], "use pytest_topsail.waiting (poll, Deadline, Every)"


def test_no_user_yaml_is_read_by_safe_load() -> None:
    assert found(yaml_loads, NOT_USER_YAML) == [], "read user YAML with pytest_topsail.yamlparse.parse_yaml"


def test_every_exception_is_still_there() -> None:
    """An exception whose code went away is removed from the lists (they only shrink)."""
    present = {(file, function.name) for file, tree in sources() for function in functions(tree)}
    files = {file for file, _ in sources()}
    for file, function in [*NOT_WAITS, *NOT_USER_YAML]:
        assert (file, function) in present or (function == "*" and file in files), (file, function)


def test_the_checks_catch_what_they_are_for() -> None:
    def loops(code: str) -> list[int]:
        return [line for _, line in deadline_loops(ast.parse(code))]

    assert loops("def f():\n    deadline = time.monotonic() + 5\n    while time.monotonic() < deadline:\n"
                 "        pass\n") == [3]
    assert loops("def f():\n    end = time.time() + 5\n    for x in y:\n        x.wait(max(end - time.time(), 0))\n"
                 ) == [3]
    assert loops("def f(self):\n    started = time.monotonic()\n    while True:\n        now = time.monotonic()\n"
                 "        if now - started > self.limit:\n            raise E\n") == [3]
    assert loops("async def f():\n    while x:\n        if asyncio.get_running_loop().time() >= t:\n"
                 "            return\n") == [2]
    # not a deadline: a measurement in a loop, a None check of a time taken once, a Deadline
    assert loops("def f():\n    while True:\n        before = time.perf_counter()\n        sleep(0.05)\n"
                 "        lags.append(time.perf_counter() - before)\n") == []
    assert loops("def f():\n    t = None\n    for o in objs:\n        if t is None:\n            t = time.time()\n"
                 ) == []
    assert loops("def f():\n    deadline = Deadline(5)\n    while not deadline.expired():\n        pass\n") == []
    module = ast.parse("import yaml\nX = yaml.safe_load('a: 1')\ndef f(p):\n    return yaml.safe_load(p.read_text())\n")
    assert [line for _, line in yaml_loads(module)] == [4, 2]
