"""Helpers for the reporting tests: a temporary project with one tiny suite recording KPIs.

The test of the suite reads the values it records from ``values.json`` in the project, so that successive sessions
can produce whatever history a test needs; cluster-like labels come from a ``pytest_topsail_labels`` hook.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

CONFIG = """
cases: [cases/demo.yaml]
regression:
  comparison_keys: [image]
  ignored_keys: [ocp_version]
  fail_on_regression: true
"""

CASES = """
- name: run
  size: [1, 2]
"""

KPIS = '''
import pydantic
from pytest_topsail.kpi import kpi


class Labels(pydantic.BaseModel):
    size: int
    image: str


@kpi(unit="tokens/s", help="Training throughput", higher_better=True, format="{:.1f}")
def throughput(data):
    return data["throughput"] * data["size"]


@kpi(unit="ms", help="Step latency", lower_better=True)
def latency(data):
    return data["latency"]


@kpi(unit="tokens", help="Average tokens per sample", lower_better=True, ignored_for_regression=True)
def avg_tokens(data):
    return data["avg_tokens"]


def parse(artifact_dir):
    import json, pathlib
    return json.loads((pathlib.Path(artifact_dir) / "results.json").read_text())
'''

TEST = """
import json
import pathlib


def test_train(case, kpis, artifact_dir, request):
    values = json.loads((pathlib.Path(str(request.config.rootpath)) / "values.json").read_text())
    data = {**values, "size": case.settings["size"]}
    (artifact_dir / "results.json").write_text(json.dumps(data))
    kpis.record_from(data)
"""

CONFTEST = """
import json
import pathlib


def pytest_topsail_labels(item):
    labels = json.loads((pathlib.Path(str(item.config.rootpath)) / "labels.json").read_text())
    return labels
"""

VALUES = {"throughput": 100.0, "latency": 10.0, "avg_tokens": 512.0}
LABELS = {"image": "v1", "ocp_version": "4.16"}


@pytest.fixture(autouse=True)
def _no_inherited_artifact_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARTIFACT_DIR", raising=False)
    for name in ("TOPSAIL_OPENSEARCH_URL", "TOPSAIL_OPENSEARCH_USERNAME", "TOPSAIL_OPENSEARCH_PASSWORD",
                 "TOPSAIL_OPENSEARCH_SECRET_FILE"):
        monkeypatch.delenv(name, raising=False)


class Project:
    """The temporary project: write files, set the values the next session records, read the outputs."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path = pytester.path
        self.sessions = 0

    def write(self, relative: str, text: str) -> Path:
        path = self.path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def set_values(self, **values: float) -> None:
        (self.path / "values.json").write_text(json.dumps({**VALUES, **values}), encoding="utf-8")

    def set_labels(self, **labels: Any) -> None:
        (self.path / "labels.json").write_text(json.dumps({**LABELS, **labels}), encoding="utf-8")

    @property
    def history(self) -> Path:
        return self.path / ".topsail" / "history.sqlite"

    def artifacts(self, name: str) -> Path:
        return self.path / "artifacts" / name

    def run(self, *args: str, name: str | None = None, subprocess: bool = False) -> pytest.RunResult:
        """One session over the suite; its artifacts go to ``artifacts/<name>`` (default ``s<N>``)."""
        self.sessions += 1
        artifacts = self.artifacts(name or f"s{self.sessions}")
        runner = self.pytester.runpytest_subprocess if subprocess else self.pytester.runpytest
        return runner("suites", "-p", "no:cacheprovider", "--artifacts", str(artifacts), *args)

    def seed_history(self, series: dict[str, Iterable[float]], *, labels: dict[str, Any] | None = None,
                     size: int = 1, days_ago: float = 30.0) -> Path:
        """Write past KPI records of item size=``size`` as a JSON-lines file (one record per test and KPI)."""
        from pytest_topsail.items import CaseRecord, ItemRecord
        from pytest_topsail.kpi import KpiRecorder, load_suite_kpis

        specs = load_suite_kpis(self.path / "suites/demo/kpis.py").specs
        columns = {name: list(values) for name, values in series.items()}
        count = len(next(iter(columns.values())))
        start = time.time() - days_ago * 86400
        lines = []
        for index in range(count):
            record = ItemRecord(suite="demo", nodeid=f"suites/demo/test_demo.py::test_train[run-size={size}]",
                                test_id=f"test_train[run-size={size}]",
                                case=CaseRecord(name="run", id=f"run-size={size}", settings={"size": size}))
            recorder = KpiRecorder(record, load_suite_kpis(self.path / "suites/demo/kpis.py"))
            recorder.labels(**{**LABELS, **(labels or {})})
            for name, values in columns.items():
                entry = recorder.record(name, values[index])
                entry["timestamp"] = start + index * 3600
                assert specs[name].name == name
            lines.extend(json.dumps(entry) for entry in record.kpis)
        path = self.path / f"seed-{size}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def import_history(self, path: Path) -> None:
        from pytest_topsail.history.__main__ import main

        assert main(["import", "--history", str(self.history), str(path)]) == 0


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    pytester.makeini("[pytest]\n")
    demo = Project(pytester)
    demo.write("suites/demo/config.yaml", CONFIG)
    demo.write("cases/demo.yaml", CASES)
    demo.write("suites/demo/kpis.py", KPIS)
    demo.write("suites/demo/test_demo.py", TEST)
    demo.write("conftest.py", CONFTEST)
    demo.set_values()
    demo.set_labels()
    return demo


@pytest.fixture
def noisy() -> Callable[[float, float, int, int], list[float]]:
    """Deterministic noisy series: ``noisy(mean, relative_sd, count, seed)``."""
    import random

    def make(mean: float, relative_sd: float, count: int, seed: int = 7) -> list[float]:
        rng = random.Random(seed)
        return [round(rng.gauss(mean, mean * relative_sd), 4) for _ in range(count)]

    return make


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def seed_both(project: Project, count: int = 20, **labels: str) -> None:
    """Past runs of both items (size 1 and 2): ``count`` noisy values of each KPI, 2 % relative stddev."""
    import random

    def noisy(mean: float, seed: int) -> list[float]:
        rng = random.Random(seed)
        return [round(rng.gauss(mean, mean * 0.02), 4) for _ in range(count)]

    for size in (1, 2):
        path = project.seed_history({"throughput": noisy(100.0 * size, size), "latency": noisy(10.0, 10 + size),
                                     "avg_tokens": noisy(512.0, 20 + size)}, size=size, labels=labels)
        project.import_history(path)


def report_text(path: Path) -> str:
    """The HTML report as text (a windows-1252 page: plotly.js travels as raw bytes)."""
    return path.read_bytes().decode("cp1252", errors="replace")
