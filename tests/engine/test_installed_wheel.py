"""pip install pytest-topsail is enough: the built wheel (not the editable install of this repository), installed in
a fresh virtual environment, gives a suite written in a directory outside this repository the cluster, namespace,
artifact_dir and kpis fixtures, and runs it on the simulator."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SUITE = {
    "pytest.ini": "[pytest]\ntopsail_suites = suites\n",
    "cases/demo.yaml": "- name: configmaps\n  objects: 3\n",
    "suites/demo/config.yaml": """
        cases: [cases/demo.yaml]
        cluster:
          sim: {nodes: 1, gpu_profile: a100, gpus_per_node: 8}
        namespace:
          name: demo-ns
        regression:
          comparison_keys: [objects]
          ignored_keys: []
          fail_on_regression: false
    """,
    "suites/demo/kpis.py": """
        import pytest_topsail as topsail


        @topsail.kpi(unit="objects", help="ConfigMaps created", higher_better=True)
        def created(data):
            return data["created"]
    """,
    "suites/demo/test_demo.py": """
        import pytest_topsail as topsail


        def test_create(case, cluster, namespace, artifact_dir, kpis):
            for index in range(case.settings["objects"]):
                cluster.kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": f"cm-{index}", "namespace": namespace}})
            listed = cluster.kube.list("v1", "ConfigMap", namespace=namespace)
            (artifact_dir / "where.txt").write_text(topsail.__file__ + "\\n" + namespace)
            kpis.record_from({"created": len([c for c in listed if c["metadata"]["name"].startswith("cm-")])})
    """,
}


def run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "ARTIFACT_DIR", "KUBECONFIG", "TOPSAIL_PRESET", "PYTEST_ADDOPTS")}
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env=environ)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def site_dirs() -> list[str]:
    """Where this interpreter finds its installed packages: its site-packages (a virtual environment's own, and the
    base interpreter's too when it was made with --system-site-packages), and the user's when enabled."""
    found = site.getsitepackages()
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return [path for path in found if Path(path).is_dir()]


def see_site_dirs_of_this_interpreter(python: Path) -> None:
    """The new environment finds this interpreter's packages after its own, as its site directories (their .pth files
    read): ``venv --system-site-packages`` would give it the base interpreter's instead, which lacks the dependencies
    when this project was installed into a virtual environment (README's fresh venv)."""
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    lines = [f"import site; site.addsitedir({path!r})" for path in site_dirs()]
    (Path(own) / "_topsail_test_parent_site.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh virtual environment with pytest-topsail installed from its wheel (built once)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "source"  # a copy: building in the repository would leave build/ and egg-info behind
    shutil.copytree(REPO / "pytest_topsail", source / "pytest_topsail",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path / "dist",
        source, cwd=tmp_path)
    [wheel] = (tmp_path / "dist").glob("pytest_topsail-*.whl")
    venv = tmp_path / "venv"  # dependencies from this interpreter's site-packages, the package from the wheel
    # without pip of its own (ensurepip is most of a venv's creation time): this interpreter's pip installs into it
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    see_site_dirs_of_this_interpreter(python)
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel,
        cwd=tmp_path)
    return python


def test_a_suite_outside_the_repository_runs_against_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    python, venv = installed, installed.parents[1]
    project = tmp_path / "elsewhere"
    for path, text in SUITE.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    result = run(python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "suites", "--artifacts",
                 project / "artifacts", "--topsail-history", project / "history.sqlite", cwd=project)
    assert "1 passed" in result.stdout, result.stdout

    artifacts = project / "artifacts"
    [where_file] = artifacts.rglob("where.txt")
    item = where_file.parent
    where, namespace = where_file.read_text().splitlines()
    assert Path(where).is_relative_to(venv), f"pytest_topsail came from {where}, not from the wheel"
    assert namespace == "demo-ns"
    [facts] = artifacts.glob("*__cluster/facts.yaml")
    assert "node_count: 1" in facts.read_text()
    records = json.loads((item / "kpis.json").read_text())
    assert [(r["name"], r["value"]) for r in records] == [("created", 3)], records


TGIS_CASES = """
- name: single
  request:
    params: {method: GREEDY, stopping: {maxNewTokens: 5}}
    request: {text: 'Once upon a time'}
"""


def test_tgis_record_and_workers_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    """The preparation fixtures ship with the plugin: the TGIS suite copied into a project of its own (no
    conftest.py, no fixtures/) records a case file with --tgis-record and then judges it, its workers deployed by
    the wheel's code on a bare simulator prepared by the wheel's gpu_operator and rhoai steps."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "suites" / "tgis", project / "suites" / "tgis", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pytest.ini").write_text("[pytest]\ntopsail_suites = suites\n", encoding="utf-8")
    cases = project / "cases.yaml"
    cases.write_text(textwrap.dedent(TGIS_CASES).lstrip(), encoding="utf-8")
    where = run(installed, "-c", "import pytest_topsail.prepare.plugin as p; print(p.__file__)", cwd=project)
    assert Path(where.stdout.strip()).is_relative_to(installed.parents[1]), where.stdout  # the wheel's code
    spec = [{"model": "google/flan-t5-small", "configs": [{"deployment_framework": "tgis_native",
                                                           "dtype_str": "float16"}], "cases": [str(cases)]}]
    command = (installed, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
               "--artifacts", tmp_path / "artifacts", "--topsail-history", tmp_path / "history.sqlite",
               "--var", "tests.tgis=" + json.dumps(spec), "--var", "runner.generate_stream=false")

    recorded = run(*command, "--tgis-record", cwd=project)
    assert f"rewrote 1 case file(s) with the reference's answers:\n  {cases}" in recorded.stdout
    assert "response:" in cases.read_text()
    judged = run(*command, cwd=project)
    assert "1 passed" in judged.stdout
    artifacts = tmp_path / "artifacts"  # both runs, numbered on: each prepared its own bare simulator
    assert len(list(artifacts.glob("*__gpu_operator/*__gpu_nodes"))) == 2
    assert len(list(artifacts.glob("*__rhoai/*__datasciencecluster"))) == 2
