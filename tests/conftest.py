"""Shared by all tests of this project.

pytester's in-process runs drop the modules first imported during a run; extension modules (numpy) then fail to load a
second time ("cannot load module more than once per process"), and hypothesis' plugin would re-import itself at every
terminal summary. What the plugin imports lazily, only when a suite reports, is therefore imported once here.
"""

import os
import signal
import tempfile
from pathlib import Path

import numpy  # noqa: F401
import pytest

import pytest_topsail.kpi  # noqa: F401
import pytest_topsail.prepare.gpu_operator  # noqa: F401 - with the next two, what the root conftest loaded as plugins
import pytest_topsail.prepare.rhoai  # noqa: F401 - before the plugin registered them lazily: the public names they
import pytest_topsail.prepare.tgis_workers  # noqa: F401 - import (topsail.Kube...) resolve once, not in a dropped run
import pytest_topsail.regression  # noqa: F401

pytest_plugins = ["pytester"]

try:
    import hypothesis.internal.observability  # noqa: F401
except ImportError:
    pass


def cache_bytecode_outside_the_checkout() -> None:
    """The pytest runs, simulators and xdist workers these tests start share one bytecode cache outside the checkout
    (PYTHONPYCACHEPREFIX), instead of compiling and assertion-rewriting pytest_topsail again in every process
    (PYTHONDONTWRITEBYTECODE, as CI machines set it): about 1 s of CPU per process started. Nothing is written into
    the checkout either way. Set before xdist starts its workers, which inherit it."""
    prefix = Path(tempfile.gettempdir()) / f"pytest-topsail-tests-pycache-{os.getuid()}"
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(prefix))
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


CHILD_RUNS_SKIP = ("hypothesispytest", "anyio", "benchmark")  # installed here, used by none of the runs tests start


def skip_unused_plugins_in_child_runs() -> None:
    """The pytest runs these tests start (several hundred) skip the third-party plugins none of them uses: at its
    terminal summary hypothesis' plugin imports all of hypothesis, anyio's imports trio, pytest-benchmark its
    machine info: together about 0.7 s of CPU per run started (1.25 s of a 2 s ``--collect-only`` of suites/).
    Set before xdist starts its workers, which inherit it."""
    skips = " ".join(f"-p no:{name}" for name in CHILD_RUNS_SKIP)
    os.environ["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {skips}".strip()


def take_sigint_back() -> None:
    """A shell starts a background job (``pytest tests &`` in a script, a CI step sent to the background) with SIGINT
    ignored, and every process started under it inherits that, Python included (no KeyboardInterrupt handler). The
    runs these tests interrupt as Ctrl-C in a terminal would (SIGINT to their process group) then ran on and the tests
    failed. The tests' processes take Python's SIGINT handler back, so the processes they start get SIGINT's default
    disposition, as a terminal's foreground job does."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)  # declared by pytest-xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: three workers per core. Most of these tests wait: on pytest runs of the suites in subprocesses,
    on simulated stages and load tests that take real time. On the 2-core machine, quiet (2026-11-28): 2 workers
    551 s, 669 CPU-s (1.2 of the 2 cores busy); 4 workers 377 s, 650 CPU-s; later that day 4 workers 362.6 s and
    6 workers 348.6 s, one after the other."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 3 * cores


def pytest_configure(config: pytest.Config) -> None:
    """``pytest tests -n N`` keeps xdist groups (``--dist loadgroup`` unless ``--dist`` is given), as a suite run does:
    a module whose tests share an expensive module-scoped fixture (a subprocess run, a simulator) is one group."""
    cache_bytecode_outside_the_checkout()
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # the workers inherit the controller's
        skip_unused_plugins_in_child_runs()
    take_sigint_back()
    from pytest_topsail.xdist_hooks import keep_groups

    keep_groups(config)
