"""``python -m pytest_topsail.compare`` on real runs of the llm_load suite (the simulator): a run with the slow-itl
preset against a smoke run (ITL and TPOT worse with intervals excluding zero, TTFT not, exit 1), two identical smoke
runs (nothing significant, exit 0), a GPU profile label changed (not comparable, naming it, exit 2), a directory of 5
runs (the matrix, one column per run), a run id of the history, and bad input (exit 3, one message)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.report.chromium import CHROMIUM, READY, visit_page

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("compare_runs")  # -n N: the module-scoped runs once
HISTORY = "history.sqlite"


def run_suite(root: Path, name: str, presets: str, history: str = HISTORY, *options: str) -> Path:
    """The run's artifacts; its terminal output in ``<name>.out`` beside them."""
    artifacts = root / name
    command = [sys.executable, "-m", "pytest", "suites/llm_load", "--preset", presets, f"--artifacts={artifacts}",
               f"--topsail-history={root / history}", "--var", "metrics.enabled=false", "-q",
               "-p", "no:cacheprovider", "-p", "no:randomly", *options]
    environment = {key: value for key, value in os.environ.items() if key != "ARTIFACT_DIR"}
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240, env=environment)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (root / f"{name}.out").write_text(result.stdout)
    return artifacts


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Smoke runs a and again, two more in their history (the noise between runs: the samples of one run cannot show
    it), and a slow-itl run (kept out of that history: its doubled ITL is no noise) judged against a with
    --topsail-baseline."""
    root = tmp_path_factory.mktemp("compare")
    for earlier in ("earlier-1", "earlier-2"):
        run_suite(root, earlier, "smoke")
    a, again = run_suite(root, "a", "smoke"), run_suite(root, "again", "smoke")
    return {"a": a, "again": again,
            "slow": run_suite(root, "slow", "smoke,slow-itl", "slow.sqlite", f"--topsail-baseline={a}",
                              f"--junitxml={root / 'slow.xml'}", "-o", "junit_family=xunit1")}


def history(runs: dict[str, Path]) -> tuple[str, Path]:
    return "--history", runs["a"].parent / HISTORY


def compare(*arguments: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_topsail.compare", *map(str, arguments)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def verdicts(junit: Path) -> dict[tuple[str, str], dict[str, str]]:
    """(item, KPI) -> the testcase's properties."""
    found = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        properties = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        found[(case.get("classname", ""), case.get("name", ""))] = properties
    return found


def test_a_slower_itl_is_worse_with_an_interval_excluding_zero_and_ttft_is_not(runs: dict[str, Path],
                                                                                 tmp_path: Path) -> None:
    junit, page = tmp_path / "compare.xml", tmp_path / "compare.html"
    result = compare(runs["a"], runs["slow"], "--junitxml", junit, "--html", page, *history(runs))
    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(junit)
    items = {item for item, _ in found}
    assert len(items) == 6
    for item in items:  # never the wrong way; TTFT never significant alone, less than ITL with others decoding
        assert found[(item, "itl_median_ms")]["verdict"] in ("worse", "no significant difference"), item
        assert_ttft_unmoved(item, found[(item, "ttft_median_ms")], found[(item, "itl_median_ms")])
    # ITL (572 token gaps) and TPOT (24 requests) of the concurrency-8 points: worse, the interval excluding zero.
    # At concurrency 1 (4 requests, 91 gaps) a machine at a load of 13 delivers tokens in bursts (a quarter of the
    # gaps near 0): the interval is wide and the verdict may be "no significant difference", rightly
    for item in (i for i in items if "concurrency=8" in i):
        for kpi in ("itl_median_ms", "tpot_median_ms"):
            entry = found[(item, kpi)]
            low, high = interval(entry["change"])
            assert entry["verdict"] == "worse" and 0 < low < high, (item, entry)
            assert float(entry["change"].split("%")[0]) > 50, entry  # the simulated ITL doubled
    assert "Bonferroni" in found[(next(iter(items)), "itl_median_ms")]["method"]
    assert "worse" in result.stdout and "exit code 1" in result.stdout.splitlines()[-1]
    html = page.read_text(encoding="latin-1")
    assert 'data-exit-code="1"' in html and "itl_median_ms" in html and "itl: " not in html.split("<h2>")[0]
    # the 6 headline KPIs against concurrency, then per item the ttft, tpot, itl, e2e and tt_ack distributions
    assert html.count('class="figure"') == 6 + 6 * 5
    assert "llm_load: throughput against concurrency" in html
    if CHROMIUM is None:
        return
    visit = visit_page(page, READY, """(async () => { await window.topsailDrawAll(); const d = Array.from(
      document.querySelectorAll("div[data-figure]")).pop();
      return {drawn: !!d.querySelector("svg"), traces: d.data.map(t => t.name),
      errors: JSON.parse(document.body.dataset.errors || "[]"),
      violations: JSON.parse(document.body.dataset.violations || "[]")}; })()""")
    assert visit.exceptions == [] and visit.console_errors == []
    assert [r for r in visit.requests if not r.startswith(("file:", "data:", "blob:"))] == []  # offline
    result = visit.result
    assert result["drawn"] and result["errors"] == [] and result["violations"] == []
    assert [name.split(" (")[0] for name in result["traces"]] == ["a", "slow"]  # one distribution per run


def assert_ttft_unmoved(item: str, ttft: dict[str, str], itl: dict[str, str]) -> None:
    """The prefill is as fast: alone (concurrency 1) TTFT does not change. With others decoding, a new request's
    prefill waits for the running decode step (continuous batching, as vLLM schedules): TTFT may grow by part of
    the slower step, on a loaded machine enough to be significant, but never as much as ITL."""
    if "concurrency=1]" in item:
        assert ttft["verdict"] == "no significant difference", (item, ttft)
    else:
        assert float(ttft["change"].split("%")[0]) < float(itl["change"].split("%")[0]), (item, ttft, itl)


def interval(change: str) -> tuple[float, float]:
    """``+95.6% [+88.0%, +103.1%]`` -> (0.88, 1.031)."""
    low, high = change.split("[")[1].rstrip("]").split(", ")
    return float(low.rstrip("%")) / 100.0, float(high.rstrip("%")) / 100.0


def test_two_identical_runs_show_no_significant_difference(runs: dict[str, Path], tmp_path: Path) -> None:
    junit = tmp_path / "compare.xml"
    result = compare(runs["a"], runs["again"], "--junitxml", junit, "--no-html", *history(runs))
    assert result.returncode == 0, result.stdout + result.stderr
    found = verdicts(junit)
    judged = [key for key, properties in found.items() if properties["verdict"] != "informational"]
    assert len(judged) >= 24  # 6 items x (ttft, itl, tpot, tt_ack medians) at least: the throughput without
    # samples needs regression.min_history (5) earlier runs in the history, which holds 3 here
    assert {found[key]["verdict"] for key in judged} == {"no significant difference"}


def test_a_different_gpu_profile_label_is_not_comparable_and_named(runs: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other-gpu"
    shutil.copytree(runs["again"], other, ignore=shutil.ignore_patterns("*.js", "*.html"))
    first = json.loads(next(runs["a"].glob("llm_load/*/item.json")).read_text())
    accelerator = first["kpis"][0]["labels"]["accelerator"]
    for path in other.glob("llm_load/*/item.json"):
        record = json.loads(path.read_text())
        for entry in record["kpis"]:
            entry["labels"]["accelerator"] = "NVIDIA-H100-80GB-HBM3"
        path.write_text(json.dumps(record))
    junit = tmp_path / "compare.xml"
    result = compare(runs["a"], other, "--junitxml", junit, "--no-html", *history(runs))
    assert result.returncode == 2, result.stdout + result.stderr
    found = verdicts(junit)
    assert {p["verdict"] for p in found.values()} == {"not comparable"}
    assert all(f"labels differ: accelerator {accelerator!r} vs 'NVIDIA-H100-80GB-HBM3'" in p["reason"]
               for p in found.values()), next(iter(found.values()))
    assert "labels differ: accelerator" in result.stdout


def test_a_directory_of_five_runs_gives_the_matrix_one_column_per_run(runs: dict[str, Path], tmp_path: Path) -> None:
    many = tmp_path / "runs"
    for index in range(5):
        shutil.copytree(runs["a" if index % 2 else "again"], many / f"run-{index}",
                        ignore=shutil.ignore_patterns("*.js", "*.html"))
    page = tmp_path / "compare.html"
    result = compare(many, "--html", page, *history(runs))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("item") and "run-0" in line)
    assert header.split() == ["item", *(f"run-{i}" for i in range(5))]
    # the suite's report.headline_kpis, each a table of the 6 items against the 5 runs
    assert "llm_load: throughput (tokens/s)" in lines and "llm_load: itl_median_ms (ms)" in lines
    html = page.read_text(encoding="latin-1")
    assert html.count('<table class="matrix">') == 6
    assert html.count("<th>run-4</th>") == 6


def test_a_run_id_of_the_history_against_an_artifacts_directory(runs: dict[str, Path], tmp_path: Path) -> None:
    """The history keeps KPI values, no samples: the changes are judged against the noise between the runs of the
    history alone."""
    record = json.loads(next(runs["slow"].glob("llm_load/*/item.json")).read_text())
    run_id = record["kpis"][0]["run_id"]
    slow_history = runs["slow"].parent / "slow.sqlite"
    result = compare(runs["a"], run_id, "--history", slow_history, "--no-html", "--junitxml", tmp_path / "c.xml")
    found = verdicts(tmp_path / "c.xml")
    itl = [p for (item, kpi), p in found.items() if kpi == "itl_median_ms"]
    assert len(itl) == 6 and all(float(p["change"].split("%")[0]) > 50 for p in itl)
    # a history of one run: no noise between runs known, nothing judged
    assert {p["verdict"] for p in itl} == {"informational"}
    assert all("(no interval)" in p["change"] for p in itl)
    assert result.returncode == 2, result.stdout + result.stderr


@pytest.mark.parametrize(("arguments", "message"), [
    (["/nonexistent/run", "/nonexistent/other"], "/nonexistent/run: no such artifacts directory"),
    (["{tmp}", "{tmp}"], "{tmp}: no run in this directory"),
])
def test_bad_input_is_one_message_naming_the_path_and_exit_3(arguments: list[str], message: str,
                                                             tmp_path: Path) -> None:
    result = compare(*(a.format(tmp=tmp_path) for a in arguments), "--history", tmp_path / "none.sqlite",
                     cwd=tmp_path)
    assert result.returncode == 3
    assert message.format(tmp=tmp_path) in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_topsail_baseline_judges_the_run_against_the_one_named(runs: dict[str, Path]) -> None:
    """The slow-itl run was started with --topsail-baseline=<a>: its terminal summary says which KPIs are worse than
    in a, the page is written, and the outcome is the tests' (the run passed)."""
    output = (runs["slow"].parent / "slow.out").read_text()
    section = output[output.index("topsail: against the baseline a"):]
    lines = section.splitlines()
    worse = {(line.split()[1], line.split()[2]) for line in lines if line.rstrip().endswith("worse")}
    assert {"itl_median_ms", "tpot_median_ms"} <= {kpi for _, kpi in worse}
    assert not any(kpi.startswith("ttft") and "concurrency=1]" in item for item, kpi in worse)  # see above
    assert any(line.startswith("topsail baseline compare: ") and " worse" in line for line in lines)
    assert (runs["slow"] / "baseline.html").is_file()


def test_topsail_baseline_verdicts_are_in_the_report_and_junit(runs: dict[str, Path]) -> None:
    """Beside the history verdicts: report.html's section names the baseline run and lists the KPIs worse with their
    interval; each testcase (junit_family xunit1) has a ``baseline.<kpi>`` property per compared KPI."""
    report = (runs["slow"] / "report.html").read_text(encoding="latin-1")  # cp1252 with plotly.js as raw bytes
    section = report[report.index('<section id="baseline">'):]
    section = section[:section.index("</section>")]
    assert "Against the baseline a<" in section and "itl_median_ms" in section
    rows = section.split("<tr>")
    assert not any("concurrency=1]" in row and "ttft_median_ms" in row for row in rows)  # assert_ttft_unmoved
    found = verdicts(runs["slow"].parent / "slow.xml")
    assert len(found) == 6
    for (item, name), properties in found.items():
        if "concurrency=1]" in item + name:
            assert properties["baseline.ttft_median_ms"].startswith("no significant difference "), properties
        assert properties["baseline.itl_median_ms"].split()[0] in ("worse", "no")  # worse where the samples tell
    itl = [p["baseline.itl_median_ms"] for p in found.values() if p["baseline.itl_median_ms"].startswith("worse")]
    assert itl and all(re.fullmatch(r"worse \+\d+\.\d% \[\+\d+\.\d%, \+\d+\.\d%\]", value) for value in itl)


def test_an_unknown_option_is_exit_3_not_2() -> None:
    assert compare("--bogus").returncode == 3
