"""The records' way from a generator pod to the runner (llmload/collect.py): the pod's record server and the
runner's pulls, here over plain loopback HTTP (the distributed tests run them through pods/portforward)."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_topsail.llmload.collect import Collector, RecordServer, post


def test_pulls_whole_lines_until_the_point_ended_then_releases_the_pod(tmp_path: Path) -> None:
    pod_dir, runner_dir = tmp_path / "pod", tmp_path / "runner"
    pod_dir.mkdir()
    runner_dir.mkdir()
    records, point = pod_dir / "gen-0.jsonl", pod_dir / "gen-0.json"
    server = RecordServer(0, records, point)  # port 0: the system's free port, bound at once (no race)
    base = f"http://127.0.0.1:{server.http.server_address[1]}"
    collector = Collector(None, "ns", "gen-0", runner_dir)  # type: ignore[arg-type] (pull needs no cluster)
    assert collector.pull(base) is False and not (runner_dir / "gen-0.jsonl").exists()  # nothing yet
    point.write_text(json.dumps({"started_epoch": 1.0}))
    records.write_text('{"index": 0}\n{"index": 1}\n{"ind')  # the last line is still being written
    assert collector.pull(base) is False
    assert (runner_dir / "gen-0.jsonl").read_text() == '{"index": 0}\n{"index": 1}\n'
    records.write_text('{"index": 0}\n{"index": 1}\n{"index": 2}\n')
    point.write_text(json.dumps({"started_epoch": 1.0, "ended": 3.0}))
    assert collector.pull(base) is False  # the last line arrives with this pull: one more to be sure
    assert collector.pull(base) is True
    assert (runner_dir / "gen-0.jsonl").read_text().splitlines() == ['{"index": 0}', '{"index": 1}', '{"index": 2}']
    assert json.loads((runner_dir / "gen-0.json").read_text())["ended"] == 3.0
    post(f"{base}/collected")
    assert server.wait_collected(timeout=5) is True


def test_an_uncollected_pod_exits_after_the_timeout(tmp_path: Path) -> None:
    server = RecordServer(0, tmp_path / "r.jsonl", tmp_path / "p.json")
    assert server.wait_collected(timeout=0.2) is False
