"""NNN__ directories (unique and ordered across threads and xdist workers), steps with FAILURE, Parallel."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from pytest_topsail.artifacts import current_artifact_dir, next_artifact_dir, step, using_artifact_dir
from pytest_topsail.config import Config, using_config
from pytest_topsail.errors import TopsailError
from pytest_topsail.parallel import Parallel, ParallelError

pytest_plugins = ["pytester"]


def numbers(parent: Path) -> list[int]:
    return sorted(int(path.name.split("__")[0]) for path in parent.iterdir() if path.is_dir())


def test_numbers_are_unique_and_contiguous_across_threads(tmp_path: Path) -> None:
    barrier = threading.Barrier(8)

    def create(worker: int) -> None:
        barrier.wait(timeout=10)
        for index in range(25):
            next_artifact_dir(f"w{worker}-{index}", parent=tmp_path)

    threads = [threading.Thread(target=create, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert numbers(tmp_path) == list(range(1, 201))
    # each thread's own directories are numbered in the order it created them
    for worker in range(8):
        mine = sorted((path for path in tmp_path.glob(f"*__w{worker}-*")), key=lambda path: path.name)
        assert [path.name.split("__")[1] for path in mine] == [f"w{worker}-{index}" for index in range(25)]


def test_numbering_continues_after_existing_directories(tmp_path: Path) -> None:
    (tmp_path / "007__old").mkdir()
    assert next_artifact_dir("new", parent=tmp_path).name == "008__new"


def test_unsafe_names_are_made_safe(tmp_path: Path) -> None:
    assert next_artifact_dir("test_x[a b/c::d]", parent=tmp_path).name == "001__test_x_a_b_c_d"


def test_step_is_current_directory_and_records_failure(tmp_path: Path) -> None:
    with using_artifact_dir(tmp_path):
        with step("prepare") as prepared:
            assert current_artifact_dir() == prepared == tmp_path / "001__prepare"
            inner = next_artifact_dir("inner")
        assert inner == prepared / "001__inner"
        with pytest.raises(ValueError, match="bad value"), step("deploy"):
            raise ValueError("bad value")
    failure = (tmp_path / "002__deploy" / "FAILURE").read_text()
    assert failure.startswith("ValueError: bad value")
    assert "Traceback (most recent call last)" in failure and 'raise ValueError("bad value")' in failure
    assert not (prepared / "FAILURE").exists()


def test_current_artifact_dir_outside_any_context_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARTIFACT_DIR", raising=False)
    with pytest.raises(TopsailError, match="no current artifact directory"):
        current_artifact_dir()


def test_parallel_runs_every_step_and_reports_all_exceptions(tmp_path: Path) -> None:
    ran: list[str] = []

    def ok(name: str) -> str:
        ran.append(name)
        (current_artifact_dir() / "out.txt").write_text(name)
        return name.upper()

    def fails(message: str) -> None:
        raise RuntimeError(message)

    with using_artifact_dir(tmp_path), pytest.raises(ParallelError) as caught:
        with Parallel("prepare") as parallel:
            parallel.delayed(fails, "first broke", name="one")
            parallel.delayed(ok, "two")
            parallel.delayed(fails, "third broke", name="three")
    assert sorted(str(exc) for exc in caught.value.exceptions) == ["first broke", "third broke"]
    assert "2 of 3 steps failed: one, three" in str(caught.value)
    assert ran == ["two"]
    region = tmp_path / "001__prepare"
    assert sorted(path.name for path in region.iterdir() if path.is_dir()) == ["001__one", "002__ok", "003__three"]
    assert (region / "002__ok" / "out.txt").read_text() == "two"
    assert "first broke" in (region / "001__one" / "FAILURE").read_text()
    assert "third broke" in (region / "003__three" / "FAILURE").read_text()
    assert "first broke" in (region / "FAILURE").read_text() and "third broke" in (region / "FAILURE").read_text()


def test_parallel_keeps_the_message_of_pytest_fail_in_a_step(tmp_path: Path) -> None:
    def quota() -> None:
        pytest.fail("GPU quota exceeded")

    def broken() -> None:
        raise OSError("disk full")

    parallel = Parallel("prepare", parent=tmp_path)
    parallel.delayed(quota)
    parallel.delayed(broken)
    with pytest.raises(ParallelError) as caught:
        parallel.run()
    messages = sorted(str(exc) for exc in caught.value.exceptions)
    assert messages == ["disk full", "step 'quota': Failed: GPU quota exceeded"]


def test_keyboard_interrupt_in_a_step_interrupts(tmp_path: Path) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    parallel = Parallel("prepare", parent=tmp_path)
    parallel.delayed(interrupted)
    parallel.delayed(lambda: None, name="ok")
    with pytest.raises(KeyboardInterrupt):
        parallel.run()


def test_parallel_returns_results_in_order_and_runs_concurrently(tmp_path: Path) -> None:
    barrier = threading.Barrier(3)  # would time out if the steps ran one after another

    def meet(value: int) -> int:
        barrier.wait(timeout=10)
        return value * 2

    parallel = Parallel("meet", parent=tmp_path)
    for value in (1, 2, 3):
        parallel.delayed(meet, value)
    assert parallel.run() == [2, 4, 6]


def test_configuration_is_frozen_inside_parallel(tmp_path: Path) -> None:
    config = Config({"jobs": 1}, source="suites/s/config.yaml")

    def change() -> None:
        config.set("jobs", 2)

    with using_config(config), using_artifact_dir(tmp_path), pytest.raises(ParallelError) as caught:
        with Parallel("change") as parallel:
            parallel.delayed(change)
    (error,) = caught.value.exceptions
    assert isinstance(error, TopsailError) and "frozen" in str(error)
    assert config.get("jobs") == 1
    config.set("jobs", 3)  # unfrozen after the region
    assert config.get("jobs") == 3


XDIST_SUITE = {
    "suites/s/config.yaml": "cases: [cases/s.yaml]\nstep_count: 3\nci_presets:\n  smoke:\n    step_count: 2\n",
    "cases/s.yaml": "- name: c\n  index: [1, 2, 3, 4, 5, 6, 7, 8]\n",
    "suites/s/test_s.py": """
        import time
        from pytest_topsail.artifacts import step
        from pytest_topsail.parallel import Parallel

        def test_steps(case, artifact_dir, topsail_config):
            for index in range(topsail_config.get("step_count")):
                with step(f"step{index}"):
                    time.sleep(0.01)
            with Parallel("both") as parallel:
                parallel.delayed(time.sleep, 0.01, name="a")
                parallel.delayed(time.sleep, 0.01, name="b")
    """,
}


def test_numbers_are_unique_across_xdist_workers(make_project) -> None:
    pytester = make_project(XDIST_SUITE)
    result = pytester.runpytest_subprocess("suites", "-n", "2", "--artifacts", "out", "--preset", "smoke",
                                           "-m", "s", "--strict-markers", timeout=300)
    result.assert_outcomes(passed=8)
    suite_dir = pytester.path / "out" / "s"
    item_dirs = sorted(path for path in suite_dir.iterdir() if path.is_dir())
    assert numbers(suite_dir) == list(range(1, 9))
    assert sorted(path.name.split("__", 1)[1] for path in item_dirs) == sorted(
        f"test_steps_c-index={index}" for index in range(1, 9))
    for item_dir in item_dirs:
        assert sorted(path.name for path in item_dir.iterdir() if path.is_dir()) == [
            "001__step0", "002__step1", "003__both"]  # the preset applied on every worker
        assert (item_dir / "exit_code").read_text().strip() == "0"
    result.stdout.fnmatch_lines([f"topsail artifacts: {pytester.path / 'out'}"])
    assert yaml.safe_load((suite_dir / "config.yaml").read_text())["presets_applied"] == ["smoke"]



def test_an_empty_counter_left_by_a_killed_process_numbers_after_the_existing_directories(tmp_path: Path) -> None:
    # the counter is written atomically now; an older run SIGKILLed while truncating it left it empty, and its
    # resumed run numbered its new items from 001 again, beside the finished items' directories
    for name in ("a", "b", "c"):
        next_artifact_dir(name, tmp_path)
    (tmp_path / ".topsail-counter").write_text("")
    assert next_artifact_dir("d", tmp_path).name == "004__d"
    assert (tmp_path / ".topsail-counter").read_text() == "4"
