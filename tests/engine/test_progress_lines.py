"""Progress lines on the terminal never share a line with pytest's own output ("..  [100%]")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CONFTEST = """
import pytest
import pytest_topsail as topsail


@pytest.fixture(scope="session")
def slow_thing(pytestconfig, tmp_path_factory):
    progress = topsail.Progress(pytestconfig, log=tmp_path_factory.mktemp("p") / "progress.log")
    progress("starting the thing")
    yield progress
    progress("thing stopped")
"""

TESTS = """
import pytest_topsail as topsail


def test_one(slow_thing, request, tmp_path):
    slow_thing("step 1 done")
    slow_thing("step 2 of another kind")
    topsail.Progress(request.config, log=tmp_path / "progress.log", prefix="[other]")("another stream")


def test_two(slow_thing):
    slow_thing("step 3 done")
"""


def test_progress_lines_start_on_their_own_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_things=TESTS)
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("ARTIFACT_DIR", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=120, env=env)
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout
    shown = [line for line in lines if "[topsail]" in line or "[other]" in line]
    assert shown == ["[topsail] starting the thing", "[topsail] step 1 done", "[topsail] step 2 of another kind",
                     "[other] another stream", "[topsail] step 3 done", "[topsail] thing stopped"], result.stdout
    between = lines[lines.index(shown[0]):lines.index(shown[3]) + 1]
    assert between == shown[:4], "no blank line between consecutive progress lines, whichever stream"
