"""Numbered artifact directories (``NNN__name``), the current directory of a context, ``FAILURE`` records.

Numbers are unique and ordered across threads and processes (xdist workers): a counter file in the parent directory
is read and incremented under a file lock. The current directory is a contextvar, so threads started by
:class:`~pytest_topsail.parallel.Parallel` (which copy the context) carry it without monkey-patching.
"""

from __future__ import annotations

import contextvars
import os
import re
import tempfile
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_topsail.errors import TopsailError

COUNTER_FILE = ".topsail-counter"
LOCK_FILE = ".topsail-counter.lock"
FAILURE_FILE = "FAILURE"
ARTIFACT_DIR_ENV = "ARTIFACT_DIR"
_MAX_NAME = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,@-]+")

_current_dir: contextvars.ContextVar[Path | None] = contextvars.ContextVar("topsail_artifact_dir", default=None)


def safe_name(name: str) -> str:
    """A file-system safe directory name: unsafe runs of characters become ``_``, length bounded."""
    cleaned = _UNSAFE.sub("_", name).strip("._") or "unnamed"
    return cleaned[:_MAX_NAME]


def current_artifact_dir() -> Path:
    """The artifact directory of this context: the running item's (or step's) directory.

    Outside a test and a step, ``$ARTIFACT_DIR`` when set (TOPSAIL convention); otherwise an error.
    """
    current = _current_dir.get()
    if current is not None:
        return current
    env = os.environ.get(ARTIFACT_DIR_ENV)
    if env:
        return Path(env)
    raise TopsailError("no current artifact directory: call inside a topsail test item or step, "
                       "or pass parent= explicitly")


@contextmanager
def using_artifact_dir(path: Path) -> Iterator[Path]:
    """Make ``path`` the current artifact directory for the block (this context and threads that copy it)."""
    token = _current_dir.set(path)
    try:
        yield path
    finally:
        _current_dir.reset(token)


def _next_number(parent: Path) -> int:
    from filelock import FileLock

    # flock() locks conflict between open files, so this serializes threads of one process as well as processes.
    with FileLock(str(parent / LOCK_FILE), timeout=60):
        counter = parent / COUNTER_FILE
        try:
            last = int(counter.read_text().strip())
        except (FileNotFoundError, ValueError):  # none yet, or an empty one left by a process killed mid-write
            last = _highest_existing_number(parent)
        number = last + 1
        write_text_atomic(counter, str(number))  # never empty: a SIGKILLed run's counter resumes where it was
        return number


def _highest_existing_number(parent: Path) -> int:
    highest = 0
    for entry in os.scandir(parent):
        prefix, sep, _ = entry.name.partition("__")
        if sep and prefix.isdigit():
            highest = max(highest, int(prefix))
    return highest


def next_artifact_dir(name: str, parent: Path | None = None) -> Path:
    """Create and return ``parent/NNN__name``; ``parent`` defaults to the current artifact directory."""
    parent = Path(parent) if parent is not None else current_artifact_dir()
    parent.mkdir(parents=True, exist_ok=True)
    number = _next_number(parent)
    path = parent / f"{number:03d}__{safe_name(name)}"
    path.mkdir()
    return path


def write_failure(directory: Path, exc: BaseException) -> Path:
    """Append the exception's type, message and traceback to ``directory/FAILURE``."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return append_failure(directory, f"{type(exc).__name__}: {exc}\n\n{text}\n")


def append_failure(directory: Path, text: str) -> Path:
    from pytest_topsail.redact import redact_text

    path = Path(directory) / FAILURE_FILE
    with path.open("a", encoding="utf-8") as out:
        out.write(redact_text(text))
    return path


@contextmanager
def step(name: str, parent: Path | None = None) -> Iterator[Path]:
    """Run the block in a new ``NNN__name`` directory (the current one meanwhile); ``FAILURE`` if it raises."""
    directory = next_artifact_dir(name, parent)
    with using_artifact_dir(directory):
        try:
            yield directory
        except BaseException as exc:
            write_failure(directory, exc)
            raise


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --- checks of the artifacts root -------------------------------------------------------------------------------

def check_creatable(path: Path, what: str) -> None:
    """Fail early, with the path in the message, when ``path`` cannot be created or written (it is created lazily)."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise TopsailError(f"{what} {path}: {existing} exists and is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TopsailError(f"{what} {path}: {existing} is not writable")
    try:  # os.access says yes for root everywhere, and /proc or a read-only mount refuse anyway: try it
        probe = tempfile.mkdtemp(prefix=".topsail-probe-", dir=existing)
    except OSError as exc:
        raise TopsailError(f"{what} {path}: cannot create a directory in {existing}: {exc.strerror}") from None
    os.rmdir(probe)

