"""At session end (controller side): this run's KPIs stored in the history, then every session output written:
``kpis.prom``, ``regression_summary.yaml``, ``verdicts.json``, the HTML report (with each suite's figures) and the
junit session properties."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.report.context import ReportContext
from pytest_topsail.report.history_index import HistoryIndex
from pytest_topsail.report.results import Results
from pytest_topsail.verdict_states import State

if TYPE_CHECKING:
    from pytest_topsail.items import ItemRecord

REPORT_FILE = "report.html"


@dataclass(eq=False)
class SessionOutputs:
    config: pytest.Config
    results: Results
    context: ReportContext
    history: HistoryIndex

    def replot_root(self) -> Path | None:
        replot = self.config.getoption("topsail_replot", None)
        return Path(replot) if replot else None

    def artifacts_root(self) -> Path:
        from pytest_topsail.run import state_of

        return self.replot_root() or state_of(self.config).artifacts_root

    def report_path(self) -> Path:
        option = self.config.getoption("topsail_report", None)
        if option:
            return Path(self.config.invocation_params.dir) / option
        return self.artifacts_root() / REPORT_FILE

    def write_all(self) -> None:
        import yaml

        from pytest_topsail.regression import summarize
        from pytest_topsail.report.junit import add_baseline, add_session
        from pytest_topsail.report.openmetrics import render

        results = self.results
        kpis = [k for r in results.records for k in r.kpis]
        root = self.artifacts_root()
        # before this run is stored: never its own noise (compare/plugin.py answers for --topsail-baseline)
        baseline = self.config.hook.pytest_topsail_baseline(config=self.config, root=root)
        self.history.store_run(results.records, results.verdicts)
        results.summary = summarize(results.verdicts, total_points=len(kpis))
        self.add_history_note(results.summary)
        if results.interrupted:
            results.summary["interrupted"] = results.interrupted
        if results.write(root / "kpis.prom", render(kpis)):
            results.outputs["KPIs"] = str(root / "kpis.prom")
        if results.write(root / "regression_summary.yaml", yaml.safe_dump(results.summary, sort_keys=False)):
            results.outputs["regression summary"] = str(root / "regression_summary.yaml")
        results.write(root / "verdicts.json", json.dumps([v.as_dict() for v in results.verdicts], indent=1))
        self.write_report(root, baseline)
        add_session(self.config, results.summary["message"], results.outputs.get("report"))
        if baseline is not None:
            add_baseline(self.config, baseline, {(r.suite, r.test_id): r.nodeid for r in results.records})
        for verdict in results.verdicts:
            if verdict.status == State.REGRESSION and self.context.suite(verdict.suite).regression.fail_on_regression:
                results.failing.append(verdict.describe())

    def add_history_note(self, summary: dict[str, Any]) -> None:
        """How many comparable earlier runs the unjudged KPIs have, and how many a verdict needs
        (``comparable_runs: {found: 2, needed: 5}``), also in the one-line verdict when nothing was judged."""
        from pytest_topsail.regression import NO_VERDICT

        short = [v for v in self.results.verdicts if v.status in (State.INSUFFICIENT_HISTORY, State.NO_HISTORY)]
        if not short:
            return
        found = min(v.history_size for v in short)
        needed = max(self.context.suite(v.suite).regression.min_history for v in short)
        summary["comparable_runs"] = {"found": found, "needed": needed}
        if summary["message"] == NO_VERDICT:
            summary["message"] = f"{NO_VERDICT} ({found} of {needed} comparable runs)"

    def write_report(self, root: Path, baseline: Any = None) -> None:
        from pytest_topsail.report.html import ReportInput, render_report

        path = self.report_path()
        results = self.results
        try:
            suite_figures = self.suite_figures(root)
            render_report(ReportInput(
                title="pytest-topsail report", records=results.records, verdicts=results.verdicts,
                summary=results.summary, run_info=self.run_info(root), problems=results.all_problems(),
                suite_figures=suite_figures, needed_history=self.needed_history(),
                suite_settings=self.suite_settings(), interrupted=results.interrupted,
                expected=results.expected, baseline=baseline.report_context() if baseline else None), path)
        except OSError as error:
            results.errors.append(f"report {path}: cannot be written ({error})")
            return
        results.outputs["report"] = str(path)

    def needed_history(self) -> dict[str, int]:
        """Comparable earlier runs each suite needs for a verdict (regression.min_history)."""
        suites = sorted({r.suite for r in self.results.records})
        return {suite: self.context.suite(suite).regression.min_history for suite in suites}

    def suite_settings(self) -> dict[str, dict[str, Any]]:
        """Each suite's report settings (``report:`` in its config.yaml): ``headline_kpis``, ``dimensions``."""
        suites = sorted({r.suite for r in self.results.records})
        return {suite: self.context.suite(suite).report_settings for suite in suites}

    def run_info(self, root: Path) -> dict[str, str]:
        """Run metadata for the report: run id, presets, git sha, cluster shape, versions, where things are."""
        import platform

        from pytest_topsail.kpi import flatten_labels

        records = self.results.records
        first: dict[str, Any] = next((k for r in records for k in r.kpis), {})
        presets = {name: ", ".join(suite.presets) or "-" for name, suite in sorted(self.context.suites.items())}
        cluster_labels: dict[str, Any] = next((r.labels for r in records if r.labels), {})
        cluster = flatten_labels(cluster_labels)
        versions = {"python": platform.python_version(), "pytest": pytest.__version__,
                    "pytest-topsail": _version("pytest-topsail"), "plotly": _version("plotly")}
        return {
            "run": str(first.get("run_id") or "-"),
            "presets": "; ".join(f"{suite}: {names}" for suite, names in presets.items()),
            "git sha": str(first.get("git_sha") or "unknown"),
            "cluster": ", ".join(f"{k}={v}" for k, v in sorted(cluster.items())) or "-",
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
            "artifacts": str(root), "generated": _now(),
            "history": ", ".join(self.history.locations()),
        }

    def suite_figures(self, root: Path) -> dict[str, list[dict[str, str]]]:
        """Figures of whole suites: ``figures(records)`` of a suite's kpis.py and the metrics over time
        (pytest_topsail/metrics), saved as ``<root>/<suite>/figures/``."""
        from pytest_topsail.metrics.collect import suite_figures as metric_figures
        from pytest_topsail.report.matrix import build_matrix

        by_suite: dict[str, list[ItemRecord]] = {}
        for record in self.results.records:
            by_suite.setdefault(record.suite, []).append(record)
        saved: dict[str, list[dict[str, str]]] = {}
        report_settings = self.suite_settings()
        for name, records in sorted(by_suite.items()):
            try:
                build = self.context.suite(name).kpis(self.config).figures
                names = build_matrix(name, records, report_settings.get(name, {}), []).names
                # a suite's figures(records) reads the records' JSON form (as saved in item.json)
                figures = {**(build([r.to_dict() for r in records]) if build is not None else {}),
                           **metric_figures(records, names)}
            except Exception as error:  # a suite's figure code must not cost the report
                self.results.problems.append(f"suite {name}: figures() failed ({type(error).__name__}: {error})")
                continue
            folder = root / name / "figures"
            for index, (title, figure) in enumerate(figures.items()):
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{index:02d}_{re.sub(r'[^a-zA-Z0-9]+', '_', title).strip('_')[:60]}.json"
                path.write_text(figure.to_json() if hasattr(figure, "to_json") else json.dumps(figure),
                                encoding="utf-8")
                saved.setdefault(name, []).append({"title": title, "path": str(path)})
        return saved


def _version(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
