"""Options of the installed plugin given as ``--opt VALUE`` behave as ``--opt=VALUE`` when VALUE is an existing path
(pytest chooses the rootdir before the plugin's options are known, and takes such a value for a path to test):
run from the repository root, the suites are found and collected the same way."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def collect(*args: str) -> tuple[int, str, list[str]]:
    environ = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in ("TOPSAIL_PRESET", "ARTIFACT_DIR", "KUBECONFIG"):
        environ.pop(name, None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "scale", "--preset",
                             "smoke", *args, "--collect-only"], cwd=REPO, capture_output=True, text=True,
                            timeout=300, env=environ)
    rootdir = re.search(r"^rootdir: (\S+)", result.stdout, re.M)
    ids = [line.strip() for line in result.stdout.splitlines() if "<Function" in line]
    return result.returncode, rootdir.group(1) if rootdir else result.stdout + result.stderr, ids


@pytest.mark.parametrize("option", ["--kubeconfig", "--topsail-history", "--artifacts"])
def test_an_existing_path_after_a_space_is_the_option_value(option: str, tmp_path: Path) -> None:
    value = tmp_path / "value"
    if option == "--artifacts":
        value.mkdir()
    else:
        value.write_text("", encoding="utf-8")  # an existing file (an empty history is a new one)
    spaced = collect(option, str(value))
    joined = collect(f"{option}={value}")
    assert spaced == joined
    code, rootdir, ids = spaced
    assert (code, rootdir) == (0, str(REPO)) and ids, spaced
