"""Config: dotted keys, @references, set/freeze, presets (TOPSAIL order semantics), --var parsing."""

from __future__ import annotations

import pytest

from pytest_topsail.config import Config, apply_presets, apply_vars, load_yaml, parse_var
from pytest_topsail.errors import TopsailError

BASE = {
    "cases": ["cases/default.yaml"],
    "cluster": {"sim": {"nodes": 100, "gpu_profile": "a100"}},
    "tests": {"scale": {"namespace": "scale-test", "jobs": 10, "ns_ref": "@tests.scale.namespace",
                        "hyper": {"r": 8, "alpha": 32}}},
}


def test_get_dotted_and_default() -> None:
    config = Config(BASE, source="suite.yaml")
    assert config.get("cluster.sim.nodes") == 100
    assert config.get("cluster.sim.missing", 7) == 7
    assert config.get("tests.scale.hyper") == {"r": 8, "alpha": 32}


def test_missing_key_names_key_and_closest() -> None:
    config = Config(BASE, source="suite.yaml")
    with pytest.raises(TopsailError, match=r"suite.yaml: unknown configuration key 'cluster.sim.node'.*sim.nodes"):
        config.get("cluster.sim.node")


def test_reference_resolved_on_read_and_follows_set() -> None:
    config = Config(BASE)
    assert config.get("tests.scale.ns_ref") == "scale-test"
    config.set("tests.scale.namespace", "other")
    assert config.get("tests.scale.ns_ref") == "other"
    assert config.as_dict()["tests"]["scale"]["ns_ref"] == "other"
    assert config.as_dict(resolve=False)["tests"]["scale"]["ns_ref"] == "@tests.scale.namespace"


def test_reference_cycle_and_dangling_reference_are_errors() -> None:
    config = Config({"a": "@b", "b": "@a", "c": "@nope.x"}, source="f.yaml")
    with pytest.raises(TopsailError, match="reference cycle: a -> b -> a"):
        config.get("a")
    with pytest.raises(TopsailError, match="'c' refers to unknown key 'nope.x'"):
        config.get("c")


def test_set_refuses_unknown_key_and_frozen_config() -> None:
    config = Config(BASE, source="suite.yaml")
    with pytest.raises(TopsailError, match="unknown configuration key 'tests.scale.new'"):
        config.set("tests.scale.new", 1)
    with config.frozen_region():
        with pytest.raises(TopsailError, match="frozen"):
            config.set("tests.scale.jobs", 1)
    config.set("tests.scale.jobs", 11)
    assert config.get("tests.scale.jobs") == 11


def test_get_returns_copies() -> None:
    config = Config(BASE)
    config.get("tests.scale.hyper")["r"] = 999
    assert config.get("tests.scale.hyper.r") == 8


def test_presets_apply_in_order_with_extends_at_its_position() -> None:
    data = Config(BASE).as_dict(resolve=False)
    presets = {
        "base-small": {"cluster.sim.nodes": 10, "tests.scale.jobs": 5},
        "dgx": {"extends": ["base-small"], "cluster.sim.nodes": 1, "cluster.sim.gpu_profile": "a100-80gb"},
        "late-extends": {"cluster.sim.nodes": 3, "extends": "base-small"},
    }
    assert apply_presets(data, presets, ["dgx"], "s.yaml") == ["dgx", "base-small"]  # TOPSAIL: before its extends
    assert data["cluster"]["sim"] == {"nodes": 1, "gpu_profile": "a100-80gb"}
    assert data["tests"]["scale"]["jobs"] == 5
    data = Config(BASE).as_dict(resolve=False)
    apply_presets(data, presets, ["late-extends"], "s.yaml")
    assert data["cluster"]["sim"]["nodes"] == 10  # extends written last overrides the preset's own earlier key


def test_preset_dict_and_list_values_replace_wholesale() -> None:
    data = Config(BASE).as_dict(resolve=False)
    apply_presets(data, {"p": {"tests.scale.hyper": {"r": 4}, "cases": ["cases/smoke.yaml"]}}, ["p"], "s.yaml")
    assert data["tests"]["scale"]["hyper"] == {"r": 4}
    assert data["cases"] == ["cases/smoke.yaml"]


def test_preset_errors_name_preset_key_file() -> None:
    presets = {"a": {"extends": ["b"]}, "b": {"extends": ["c"]}, "c": {"extends": ["a"]},
               "newkey": {"tests.scale.jobz": 1}}
    with pytest.raises(TopsailError, match=r"s.yaml: preset cycle: a -> b -> c -> a"):
        apply_presets(Config(BASE).as_dict(), presets, ["a"], "s.yaml")
    with pytest.raises(TopsailError, match=r"s.yaml: preset 'newkey' sets 'tests.scale.jobz'.*tests.scale.jobs"):
        apply_presets(Config(BASE).as_dict(), presets, ["newkey"], "s.yaml")
    with pytest.raises(TopsailError, match=r"unknown preset 'zzz'.*presets defined: a, b, c, newkey"):
        apply_presets(Config(BASE).as_dict(), presets, ["zzz"], "s.yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("a.b=4", ("a.b", 4)),
    ("a.b=[1, 2]", ("a.b", [1, 2])),
    ("a.b={x: 1}", ("a.b", {"x": 1})),
    ("a.b=true", ("a.b", True)),
    ("a.b=text with = sign", ("a.b", "text with = sign")),
    ("a.b=", ("a.b", None)),  # null, as YAML and TOPSAIL read an empty value
    ("a.b[2]=x", ("a.b[2]", "x")),
])
def test_parse_var_yaml_values(text: str, expected: tuple) -> None:
    assert parse_var(text) == expected


@pytest.mark.parametrize("text", ["novalue", "=3", "a..b=1", "a.b=[1, 2"])
def test_parse_var_malformed(text: str) -> None:
    with pytest.raises(TopsailError, match="--var|invalid configuration key"):
        parse_var(text)


def test_apply_vars_only_existing_keys() -> None:
    data = Config(BASE).as_dict(resolve=False)
    assert apply_vars(data, [("tests.scale.jobs", 3), ("other.key", 1)]) == ["tests.scale.jobs"]
    assert data["tests"]["scale"]["jobs"] == 3 and "other" not in data


def test_load_yaml_reports_file_and_line(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(TopsailError, match=r"bad.yaml: malformed YAML: line \d+, column \d+"):
        load_yaml(bad)


YAML_KINDS = """
defaults: &defaults {gpus: 1, image: "quay.io/x:1"}
training:
  <<: *defaults
  gpus: 8
shared: [*defaults, *defaults]
numbers: [1, -2, 0x1f, 1.5, .inf, 1e-5, "3"]
plain: [yes, no, true, null, ~, "", 2026-11-22, 2026-11-22T10:00:00Z]
nested: {a: {b: [{c: d}]}}
binary: !!binary aGVsbG8=
set: !!set {a, b}
quoted: ["1", '2.5', "true", !!str 3, !!int "4", !!float 5]
anchored: &list [a, &scalar b]
again: [*list, *scalar, *list]
? &key k
: *key
seq_tags: [!!seq [1], !!map {x: 1}, ! plain]
"""


def test_parse_yaml_gives_what_safe_load_gives() -> None:
    import yaml

    from pytest_topsail.config import parse_yaml

    parsed = parse_yaml(YAML_KINDS)
    assert parsed == yaml.safe_load(YAML_KINDS)
    assert parsed["shared"][0] is parsed["shared"][1]  # aliases are one object, as with safe_load
    assert parsed["again"][0] is parsed["anchored"] is parsed["again"][2]
    cases = "".join(f"- name: case-{index}\n  jobs: {index % 3}\n  on: [yes, off]\n  n: ~\n" for index in range(50))
    assert parse_yaml(cases) == yaml.safe_load(cases)
    recursive = parse_yaml("a: &x [1, *x]\n")
    assert recursive["a"][1] is recursive["a"]
    assert parse_yaml("") is None and parse_yaml("- a\n") == ["a"]
    for unsafe_or_invalid in ("a: !!python/object/apply:os.system [ls]\n", "? [list, key]\n: value\n"):
        with pytest.raises(yaml.YAMLError):
            parse_yaml(unsafe_or_invalid)


def test_yaml_cache_is_used_and_invalidated_by_content(tmp_path) -> None:
    cases = tmp_path / "cases.yaml"
    cache = tmp_path / "cache"
    cases.write_text("- name: a\n  jobs: 1\n")
    assert load_yaml(cases, cache_dir=cache) == [{"name": "a", "jobs": 1}]
    (entry,) = cache.iterdir()
    entry_bytes = entry.read_bytes()
    assert load_yaml(cases, cache_dir=cache) == [{"name": "a", "jobs": 1}]  # read back
    cases.write_text("- name: b\n  jobs: 2\n")  # same size, same second: the hash of the bytes decides
    assert load_yaml(cases, cache_dir=cache) == [{"name": "b", "jobs": 2}]
    assert list(cache.iterdir()) == [entry] and entry.read_bytes() != entry_bytes  # one entry per file
    entry.write_bytes(b"garbage")
    assert load_yaml(cases, cache_dir=cache) == [{"name": "b", "jobs": 2}]


def test_yaml_cache_skips_what_marshal_cannot_hold(tmp_path) -> None:
    import datetime

    dated = tmp_path / "dated.yaml"
    dated.write_text("- name: a\n  day: 2026-11-22\n")
    expected = [{"name": "a", "day": datetime.date(2026, 11, 22)}]
    assert load_yaml(dated, cache_dir=tmp_path / "cache") == expected
    assert load_yaml(dated, cache_dir=tmp_path / "cache") == expected
    assert not list((tmp_path / "cache").glob("*.marshal"))


def test_malformed_yaml_is_not_cached_and_names_the_shown_path(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- name: [a\n")
    with pytest.raises(TopsailError, match=r"^cases/bad.yaml: malformed YAML: line 2"):
        load_yaml(bad, "cases/bad.yaml", cache_dir=tmp_path / "cache")
    bad.write_bytes(b"- name: \xff\n")
    with pytest.raises(TopsailError, match=r"^cases/bad.yaml: not UTF-8 text"):
        load_yaml(bad, "cases/bad.yaml", cache_dir=tmp_path / "cache")


def test_a_validation_message_names_each_key_as_the_user_writes_it() -> None:
    """The one formatter: a '<file>: <section>' location gives whole keys (cluster.sim.nodes, not 'cluster.sim ...
    key nodes'), a shortcut is named as typed (never node_pools[0].count), a union's members are one problem under
    the user's key (never literal[...] or bool), and a dict key that happens to be a type name stays a key."""
    from typing import Literal

    import pydantic

    from pytest_topsail.errors import TopsailError, describe_validation_error
    from pytest_topsail.sim.controllers.profile import Profile

    class Model(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(strict=True, extra="forbid")
        plots: Literal["shared", "directory"] | bool = "shared"
        limits: dict[str, int] = {}

    with pytest.raises(pydantic.ValidationError) as error:
        Model.model_validate({"plots": "maybe", "limits": {"bool": "x"}, "plotz": 1})
    assert describe_validation_error(error.value, "suites/s/config.yaml: tests.s", "invalid settings", Model) == (
        "suites/s/config.yaml: invalid settings: key tests.s.plots: Input should be 'shared' or 'directory', or a "
        "valid boolean (got 'maybe'); key tests.s.limits.bool: Input should be a valid integer (got 'x'); "
        "key tests.s.plotz: unknown key; known: limits, plots")
    assert describe_validation_error(error.value, "profile.yaml", "bad").startswith("profile.yaml: bad: key plots: ")
    with pytest.raises(TopsailError) as raised:
        Profile.from_dict({"nodes": -3}, source="suites/s/config.yaml: cluster.sim")
    assert str(raised.value) == ("suites/s/config.yaml: invalid simulator profile: key cluster.sim.nodes: Input "
                                 "should be greater than or equal to 0 (got -3)")
