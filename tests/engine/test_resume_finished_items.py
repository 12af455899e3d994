"""What ``--topsail-resume`` counts as finished in a stopped run's artifacts directory (pytest_topsail/resume.py):
an item directory whose ``item.json`` reads as a record with an end and a final outcome; a kill before that
(no item.json, a truncated one, one without an end) leaves it unfinished, with the reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from pytest_topsail.resume import read_saved_run

NODEID = "suites/s/test_s.py::test_s[{}]"


def item(root: Path, number: int, case: str, **fields: object) -> Path:
    directory = root / "s" / f"{number:03d}__test_s_{case}"
    directory.mkdir(parents=True)
    record = {"suite": "s", "nodeid": NODEID.format(case), "test_id": f"test_s[{case}]", "outcome": "passed",
              "start": 1.0, "end": 2.0, "kpis": [{"name": "x", "value": 1.5, "run_id": "run-1"}], **fields}
    (directory / "item.json").write_text(json.dumps(record))
    return directory


def test_finished_items_are_those_with_a_whole_record(tmp_path: Path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "config.yaml").write_text("{}\n")
    item(tmp_path, 1, "a")
    item(tmp_path, 2, "b", outcome="failed")
    item(tmp_path, 3, "c", end=None)
    (item(tmp_path, 4, "d") / "item.json").write_text('{"suite": "s", "nodeid": "x", "kp')  # the kill mid-write
    (tmp_path / "s" / "005__test_s_e").mkdir()  # killed during the item

    saved = read_saved_run(tmp_path)

    assert sorted(saved.finished) == [NODEID.format("a"), NODEID.format("b")]
    assert saved.finished[NODEID.format("b")].outcome == "failed"  # a failure is finished: not retried
    assert saved.finished[NODEID.format("a")].artifact_dir == str(tmp_path / "s" / "001__test_s_a")
    reasons = "\n".join(saved.unfinished)
    assert "003__test_s_c: item.json without an end and a final outcome" in reasons
    assert "004__test_s_d: item.json unreadable" in reasons
    assert "005__test_s_e: no item.json" in reasons
    assert saved.suites == ["s"]
    assert saved.run_id() == "run-1"


class Item:
    """What the resume reads of a collected item: its node id and its xdist_group marks."""

    def __init__(self, nodeid: str, *groups: str) -> None:
        self.nodeid = nodeid
        self.groups = groups

    def iter_markers(self, name: str) -> list[pytest.Mark]:
        return [pytest.mark.xdist_group(group).mark for group in self.groups] if name == "xdist_group" else []


def test_an_item_saved_by_an_xdist_worker_is_found_under_its_group(tmp_path: Path):
    group = "flan-t5-small/tgis_native|bf16"  # a TGIS worker's group: with a slash
    item(tmp_path, 1, "a", nodeid=NODEID.format("a") + f"@{group}")
    item(tmp_path, 2, "b")

    saved = read_saved_run(tmp_path)

    assert saved.finished_record(cast(pytest.Item, Item(NODEID.format("a"), group))) is not None
    assert saved.finished_record(cast(pytest.Item, Item(NODEID.format("a")))) is None  # another group: another item
    assert saved.finished_record(cast(pytest.Item, Item(NODEID.format("b"), "g"))) is not None  # saved without xdist
