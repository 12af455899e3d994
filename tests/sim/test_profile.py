"""The simulator profile: defaults, command-line shortcuts, suite sections, and the messages for bad input."""

from __future__ import annotations

import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.hardware import get_gpu_profile, known_gpu_profiles, sanitize_label_value
from pytest_topsail.kube.quantity import parse_cpu_millis, parse_memory_bytes
from pytest_topsail.sim.controllers.profile import ApiFault, Profile
from pytest_topsail.sim.run.profile import build_profile, load_profile


def test_defaults_make_a_small_fast_gpu_cluster():
    profile = load_profile(None)
    assert profile.total_nodes == 2
    pool = profile.node_pools[0]
    assert (pool.gpu_profile, pool.gpu_count, pool.node_cpu, pool.node_memory) == ("a100", 8, "96", "1152Gi")
    stages = profile.stages
    startup_ms = sum(s.delay_ms + s.jitter_ms for s in (stages.initialize, stages.start))
    assert startup_ms < 500


def test_flags_override_the_first_pool_and_the_seed(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "seed: 3\n"
        "node_pools:\n"
        "  - {name: big, count: 2, gpu_profile: a100, gpus_per_node: 4}\n"
        "  - {name: cpu, count: 5, gpu_profile: none}\n"
    )
    profile = load_profile(path, nodes=7, gpu_profile="h100", seed=9)
    assert profile.seed == 9
    big, cpu = profile.node_pools
    assert (big.count, big.gpu_profile, big.gpu_count) == (7, "h100", 8)  # a new GPU profile brings its own default
    assert (cpu.count, cpu.gpu_count) == (5, 0)
    assert load_profile(path, gpus_per_node=2).node_pools[0].gpu_count == 2


def test_suite_section_with_shortcut_keys():
    profile = Profile.from_dict({"nodes": 100, "gpu_profile": "l40s", "gpus_per_node": 2,
                                 "stages": {"start": {"delay_ms": 5}}}, source="suites/scale/config.yaml cluster.sim")
    pool = profile.node_pools[0]
    assert (pool.count, pool.gpu_profile, pool.gpu_count) == (100, "l40s", 2)
    assert profile.stages.start.delay_ms == 5


def test_round_trip_through_a_plain_mapping():
    profile = Profile.from_dict({
        "seed": 5,
        "node_pools": [{"name": "g", "count": 3, "cpu": 32, "memory": "256Gi", "labels": {"zone": "a"},
                        "taints": [{"key": "gpu", "value": "true"}], "not_ready": 1}],
        "faults": {"api": [{"verb": "create", "resource": "pods", "error_rate": 0.5, "code": 429}],
                   "pods": [{"action": "fail", "fraction": 0.25, "selector": {"match_labels": {"app": "x"}}}],
                   "nodes": [{"pool": "g", "count": 1, "after_ms": 100}]},
    })
    assert Profile.from_dict(profile.to_dict()) == profile
    assert profile.node_pools[0].cpu == "32"


def test_api_fault_matching():
    fault = ApiFault(verb="create", resource="batch/jobs", error_rate=1.0, code=503)
    assert fault.matches("create", "jobs", "batch")
    assert not fault.matches("create", "jobs", "")
    assert not fault.matches("delete", "jobs", "batch")
    assert ApiFault().matches("list", "anything")


def test_unknown_keys_name_the_file_and_the_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("node_pools:\n  - {name: gpu, cpus: 4}\nstages:\n  start: {delay: 3}\n")
    with pytest.raises(TopsailError) as info:
        load_profile(path)
    message = str(info.value)
    assert str(path) in message
    assert "node_pools[0].cpus: unknown key" in message
    assert "stages.start.delay: unknown key" in message


def test_unknown_gpu_profile_lists_the_known_ones(tmp_path):
    with pytest.raises(TopsailError) as info:
        load_profile(None, gpu_profile="a1000")
    assert "unknown GPU profile 'a1000'" in str(info.value)
    for name in ("a100", "a100-80gb", "h100", "l40s", "t4"):
        assert name in str(info.value)
    path = tmp_path / "p.yaml"
    path.write_text("node_pools: [{name: x, gpu_profile: v100}]\n")
    with pytest.raises(TopsailError, match=r"p\.yaml.*node_pools\[0\]\.gpu_profile: unknown GPU profile 'v100'"):
        load_profile(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("seed: [1\n", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("node_pools: [{name: x, count: 2, not_ready: 3}]\n", "not_ready (3) is larger than count (2)"),
        ("node_pools: [{name: x}, {name: x}]\n", "repeated: x"),
        ("node_pools: [{name: x, memory: lots}]\n", "node_pools[0].memory: not a Kubernetes quantity"),
        ("node_pools: [{name: Bad_Name}]\n", "node_pools[0].name"),
        ("faults: {api: [{code: 404}]}\n", "faults.api[0].code"),
        ("faults: {pods: [{action: explode}]}\n", "faults.pods[0].action"),
        ("faults: {nodes: [{pool: nope}]}\n", "names pool 'nope'"),
        ("stages: {start: {delay_ms: -1}}\n", "stages.start.delay_ms"),
    ],
)
def test_bad_profiles_give_one_clear_message(tmp_path, text, expected):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    with pytest.raises(TopsailError) as info:
        load_profile(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TopsailError, match="cannot be read"):
        load_profile(tmp_path / "absent.yaml")


def test_empty_file_means_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_profile(path) == load_profile(None)


def test_gpu_profiles_and_labels():
    assert {"a100", "a100-80gb", "h100", "l40s", "t4"} <= set(known_gpu_profiles())
    assert sanitize_label_value(get_gpu_profile("a100").product) == "NVIDIA-A100-SXM4-40GB"
    assert sanitize_label_value(get_gpu_profile("t4").product) == "Tesla-T4"
    assert len(sanitize_label_value("x" * 100)) == 63
    with pytest.raises(ValueError, match="known: a100"):
        get_gpu_profile("k80")


@pytest.mark.parametrize(("value", "millis"), [("500m", 500), ("2", 2000), (1.5, 1500), ("0.1", 100), ("1e3m", 1000)])
def test_cpu_quantities(value, millis):
    assert parse_cpu_millis(value) == millis


@pytest.mark.parametrize(
    ("value", "amount"), [("1Mi", 2**20), ("2Gi", 2 * 2**30), ("1G", 10**9), ("128974848", 128974848)]
)
def test_memory_quantities(value, amount):
    assert parse_memory_bytes(value) == amount


@pytest.mark.parametrize("value", ["12 apples", "1.2.3Gi", "1e999999999", "1e-999999999", "9" * 80 + "Ei"])
def test_bad_quantity(value):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):  # at once: "1e999999999" must not be expanded
        parse_memory_bytes(value)


def test_plugin_settings_are_checked_by_their_plugin_when_the_profile_is_built(tmp_path):
    profile = build_profile({"plugins": {"fine_tuning": {"time_scale": 0.5}}})
    assert profile.plugins == {"fine_tuning": {"time_scale": 0.5}}
    path = tmp_path / "p.yaml"
    path.write_text("plugins:\n  fine_tuning: {time_scale: -1}\n")
    with pytest.raises(TopsailError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"simulator profile {path}: invalid simulator plugin settings: "
                                      "key plugins.fine_tuning.time_scale: ")
    with pytest.raises(TopsailError) as info:
        build_profile({"plugins": {"fine_tunning": {}}}, source="cluster.sim")
    message = str(info.value)
    assert message.startswith("cluster.sim: plugins.fine_tunning: no simulator controller of this run takes "
                              "settings called 'fine_tunning'; known: ")
    assert "fine_tuning" in message.rsplit("known: ", 1)[1].split(", ")


def test_a_domain_section_at_the_top_lists_the_known_keys():
    with pytest.raises(TopsailError) as info:
        Profile.from_dict({"fine_tuning": {"time_scale": 0.5}}, source="cluster.sim")
    assert "key fine_tuning: unknown key; known: " in str(info.value)
    assert "plugins" in str(info.value)


def test_a_built_profile_is_handed_over_unchanged_and_a_foreign_file_is_refused(tmp_path):
    from pytest_topsail.sim.run.profile import load_built, write_built

    built = Profile.from_dict({"seed": 4, "nodes": 3, "faults": {"api": [{"verb": "list", "error_rate": 0.5}]},
                               "plugins": {"fine_tuning": {"noise": 0.0}}})
    write_built(built, tmp_path / "profile.json")
    assert load_built(tmp_path / "profile.json") == built
    (tmp_path / "other.json").write_text('{"seed": "4"}')
    with pytest.raises(TopsailError, match=r"other\.json: not written by write_built: key seed"):
        load_built(tmp_path / "other.json")
