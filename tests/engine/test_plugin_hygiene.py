"""Plugin hygiene: the plugin can be disabled, presets survive IDE runners (environment and ini key), and a node id
only a preset selects gets a hint naming that preset."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_in_repo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    for name in ("TOPSAIL_PRESET", "ARTIFACT_DIR"):
        if env is None or name not in env:
            environ.pop(name, None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=environ)


def ids(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize("path", ["suites", "tests/engine/test_config.py"])
def test_the_plugin_can_be_disabled(path: str) -> None:
    result = pytest_in_repo("-p", "no:topsail", path, "--collect-only", "-q")
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_disabled_plugin_takes_its_fixtures_with_it() -> None:
    """The engine's fixtures (case, cluster, namespace, artifact_dir) are part of the plugin: disabled, a suite item
    needing them errors at setup, naming the fixture, and the plugin's fixtures are not offered."""
    result = pytest_in_repo("-p", "no:topsail", "suites/scale", "-q")
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert "fixture 'case' not found" in result.stdout
    offered = result.stdout.split("available fixtures:", 1)[1].split("use 'pytest --fixtures", 1)[0]
    assert not {"cluster", "namespace", "artifact_dir"} & set(re.findall(r"[a-z_]+", offered))


def test_topsail_preset_environment_equals_the_option() -> None:
    by_option = pytest_in_repo("suites", "--preset", "smoke", "--collect-only", "-q")
    by_env = pytest_in_repo("suites", "--collect-only", "-q", env={"TOPSAIL_PRESET": "smoke"})
    assert by_option.returncode == by_env.returncode == 0
    assert ids(by_option) == ids(by_env) and ids(by_option) != ids(pytest_in_repo("suites", "--collect-only", "-q"))


SUITE = {
    "suites/s/config.yaml": "cases: [cases/all.yaml]\nci_presets:\n  smoke: {cases: [cases/smoke.yaml]}\n",
    "cases/all.yaml": "- name: big\n  n: [1, 2]\n",
    "cases/smoke.yaml": "- name: tiny\n",
    "suites/s/test_s.py": "def test_a(case):\n    pass\n",
}


def test_presets_from_the_ini_key_and_the_option_wins(make_project) -> None:
    pytester = make_project(SUITE)
    pytester.makeini("[pytest]\ntopsail_presets = smoke\n")
    assert [line for line in pytester.runpytest("suites", "--co", "-q").stdout.lines if "::" in line] == [
        "suites/s/test_s.py::test_a[tiny]"]


def test_an_id_only_a_preset_selects_gets_a_hint(make_project) -> None:
    pytester = make_project(SUITE)
    result = pytester.runpytest("suites/s/test_s.py::test_a[tiny]")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*hint: [[]tiny] exists in suite s with --preset smoke (presets selecting it: "
                                 "smoke;*"])
    assert pytester.runpytest("suites/s/test_s.py::test_a[tiny]", "--preset", "smoke").ret == 0
