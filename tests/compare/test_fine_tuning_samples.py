"""Per-step samples of the fine-tuning KPIs (``PointMetrics.step_samples``, the suite's ``samples``): from real
trainer logs (tests/fine_tuning/data), and on two simulated runs: a trainer a third slower (the simulator's
``mfu_max`` 0.45 -> 0.3) is worse on every throughput KPI and the runtime, with intervals excluding zero, exit 1;
two identical runs are not significantly different, exit 0. The page overlays each point's loss curve run by run
and draws tokens/s by GPU count, one line per run and tuning method (the suite's ``compare_figures``)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from pytest_topsail.fine_tuning import PointMetrics, parse_file
from tests.report.chromium import CHROMIUM, READY, visit_page

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "fine_tuning" / "data"
pytestmark = pytest.mark.xdist_group("fine_tuning_samples")  # -n N: the module-scoped runs once
SAMPLED = ("train_tokens_per_second", "train_tokens_per_gpu_per_second", "dataset_tokens_per_second",
           "dataset_tokens_per_second_per_gpu", "train_runtime")
SLOWER = "cluster.sim.plugins.fine_tuning={time_scale: 0.2, startup_s: 1, save_s: 0.5, mfu_max: 0.3}"


@pytest.mark.parametrize(("log", "gpus"), [("full-bloom-2ranks.log", 2), ("lora-llama-2pods.log", 2),
                                           ("full-llama-1rank-fms.log", 1)])
def test_steps_of_a_real_trainer_log_add_up_to_its_summary(log: str, gpus: int) -> None:
    results = parse_file(DATA / log)
    samples = PointMetrics(results, gpus=gpus, epochs=1.0).step_samples()
    assert set(samples) == set(SAMPLED)
    steps = samples["train_runtime"]
    assert len(steps) == len(results.progress) >= 10
    # the steps' seconds add up to the trainer's runtime (its last progress line is printed just before the end)
    runtime = results.summary["train_runtime"]
    assert runtime is not None and 0.9 * runtime <= sum(steps) <= runtime
    seen = results.progress[-1].values["num_input_tokens_seen"]
    tokens = sum(rate * seconds for rate, seconds in zip(samples["train_tokens_per_second"], steps, strict=True))
    assert seen is not None and tokens == pytest.approx(seen)
    assert samples["train_tokens_per_gpu_per_second"] == pytest.approx(
        [rate / gpus for rate in samples["train_tokens_per_second"]])


def test_a_log_without_the_elapsed_time_per_step_has_no_samples(tmp_path: Path) -> None:
    log = tmp_path / "pod.log"  # transformers 4.x without include_num_input_tokens_seen: no time per progress line
    log.write_text("dataset stats: {'total_tokens': 100, 'total_samples': 10, 'avg_tokens_per_sample': 10.0, "
                   "'max_seq_token': 12}\n"
                   + "".join(f"{{'loss': {2 - i / 10}, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': {i / 4}}}\n"
                             for i in range(1, 5))
                   + "{'train_runtime': 4.0, 'train_samples_per_second': 2.5, 'train_steps_per_second': 1.0, "
                     "'train_tokens_per_second': 25.0, 'train_loss': 1.8, 'epoch': 1.0}\n")
    assert PointMetrics(parse_file(log), gpus=1, epochs=1.0).step_samples() == {}


def run_suite(root: Path, name: str, *options: str) -> Path:
    artifacts = root / name
    command = [sys.executable, "-m", "pytest", "suites/fine_tuning", "--preset", "smoke", f"--artifacts={artifacts}",
               f"--topsail-history={root / 'history.sqlite'}", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               *options]
    environment = {key: value for key, value in os.environ.items() if key != "ARTIFACT_DIR"}
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return artifacts


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fine_tuning_samples")
    return {"a": run_suite(root, "a"), "again": run_suite(root, "again"),
            "slow": run_suite(root, "slow", "--var", SLOWER)}


def compare(a: Path, b: Path, junit: Path, *page: str) -> tuple[int, dict[tuple[str, str], dict[str, str]]]:
    result = subprocess.run([sys.executable, "-m", "pytest_topsail.compare", str(a), str(b), *(page or ["--no-html"]),
                             "--junitxml", str(junit), "--history", str(a.parent / "history.sqlite")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    found = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        found[(case.get("classname", ""), case.get("name", ""))] = {
            p.get("name", ""): p.get("value", "") for p in case.iter("property")}
    return result.returncode, found


def test_a_slower_trainer_is_worse_on_every_sampled_kpi(runs: dict[str, Path], tmp_path: Path) -> None:
    code, found = compare(runs["a"], runs["slow"], tmp_path / "compare.xml")
    assert code == 1
    items = {item for item, _ in found}
    assert len(items) == 2  # the full and LoRA points
    for item in items:
        for kpi in SAMPLED:
            entry = found[(item, kpi)]
            assert entry["verdict"] == "worse", (item, kpi, entry)
            assert "bootstrap of the mean of " in entry["method"], entry
            change = float(entry["change"].split("%")[0])
            assert (change > 40) if kpi == "train_runtime" else (-40 < change < -25), entry  # a third slower
    worse = {kpi for (_, kpi), entry in found.items() if entry["verdict"] == "worse"}
    assert worse == set(SAMPLED)  # the informational KPIs (dataset size, device peak) are not judged


def test_two_identical_runs_show_no_significant_difference(runs: dict[str, Path], tmp_path: Path) -> None:
    code, found = compare(runs["a"], runs["again"], tmp_path / "compare.xml")
    assert code == 0
    for (item, kpi), entry in found.items():
        if kpi in SAMPLED:
            assert entry["verdict"] == "no significant difference", (item, kpi, entry)
            assert "[" in entry["change"], entry  # with its interval
        else:
            assert entry["verdict"] in ("no significant difference", "informational"), (item, kpi, entry)


def test_the_page_overlays_the_loss_curves_and_tokens_per_gpu_count_by_run(runs: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    compare(runs["a"], runs["slow"], tmp_path / "compare.xml", "--html", str(page))
    html = page.read_text(encoding="latin-1")
    titles = ["fine_tuning: smoke-method=full: loss by run", "fine_tuning: smoke-method=lora: loss by run",
              "fine_tuning: train_tokens_per_second by GPU count and run"]
    assert all(title in html for title in titles)
    if CHROMIUM is None:
        return
    visit = visit_page(page, READY, """(async () => { await window.topsailDrawAll();
      return Array.from(document.querySelectorAll("div[data-figure]")).filter(d => /: loss$|by GPU count$/.test(
        (d.layout.title || {}).text || "")).map(d => ({
        drawn: !!d.querySelector("svg"), traces: d.data.map(t => [t.name, t.x.length])})); })()""")
    assert visit.exceptions == [] and visit.console_errors == []
    loss_full, loss_lora, throughput = visit.result
    for loss in (loss_full, loss_lora):  # 25 logged steps of each run, overlaid
        assert loss["drawn"] and loss["traces"] == [["a", 25], ["slow", 25]]
    assert throughput["drawn"] and sorted(throughput["traces"]) == [
        ["a tuning_method=full", 1], ["a tuning_method=lora", 1], ["slow tuning_method=full", 1],
        ["slow tuning_method=lora", 1]]
