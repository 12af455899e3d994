"""A TOPSAIL project's configuration, unchanged: presets editing presets, list items, inline and secret-file
references, ci_presets.variable_overrides, PR directives, the applied-preset order. Each expected document is what
TOPSAIL's algorithm (docs/configuration.md, "Coming from TOPSAIL") gives, traced step by step in the comments."""

from __future__ import annotations

import copy

import pytest
import yaml

from pytest_topsail.config import Config, closest_config_keys, preset_names
from pytest_topsail.config import apply_presets_and_overrides as build
from pytest_topsail.errors import TopsailError
from pytest_topsail.redact import REDACTED, redact, redact_text

TOPSAIL_CONFIG = """
secrets:
  dir:
    env_key: TEST_SECRET_DIR
  hf_token_file: hf_token
ci_presets:
  to_apply: [base]
  variable_overrides:
    tests.fine_tuning.test_settings.model_name: granite-7b
  names: []
  name: null
  base:
    tests.fine_tuning.matbenchmarking.enabled: false
  light:
    extends: [base]
    tests.fine_tuning.test_settings.gpu: 1
    tests.fine_tuning.test_settings.dataset_replication: 0.1
  gating_smoke:
    ci_presets.light["tests.fine_tuning.test_settings.gpu"]: 2
    extends: [light]
    tests.llama.ggml_libs[0]: cuda
    tests.llama.vllm_args[1]: --max-model-len=4096
  ilab_scale:
    extends: [gating_smoke, light]
    tests.fine_tuning.test_settings.dataset_replication: 0.5
tests:
  fine_tuning:
    matbenchmarking:
      enabled: true
    test_settings:
      model_name: llama-3-8b
      gpu: 8
      dataset_replication: 1
      dataset_name: "{@tests.fine_tuning.test_settings.model_name}-alpaca"
      run_name: "run {@tests.fine_tuning.test_settings.model_name} on {@tests.fine_tuning.test_settings.gpu} gpus"
      hf_token: "*$@secrets.hf_token_file"
  llama:
    ggml_libs: [cpu, rocm]
    vllm_args: [--dtype=half, --max-model-len=2048]
"""


def load(text: str = TOPSAIL_CONFIG) -> tuple[dict, dict]:
    document = yaml.safe_load(text)
    return document, document.pop("ci_presets")


def test_presets_editing_presets_list_items_and_variable_overrides() -> None:
    document, presets = load()
    applied = build(document, presets, "config.yaml", requested=["ilab_scale"], pr_overrides=[],
                                 var_overrides=[])
    # to_apply: base (matbenchmarking off). variable_overrides: model_name. Then ilab_scale, recorded first:
    #   extends gating_smoke -> sets ci_presets.light[...gpu] = 2, extends light -> extends base, gpu = 2 (the edited
    #   light), replication 0.1; then gating_smoke's list items. Then light again (gpu 2, replication 0.1), then
    #   ilab_scale's own replication 0.5.
    assert applied == ["base", "ilab_scale", "gating_smoke", "light"]
    settings = document["tests"]["fine_tuning"]["test_settings"]
    assert settings["gpu"] == 2 and settings["dataset_replication"] == 0.5 and settings["model_name"] == "granite-7b"
    assert document["tests"]["fine_tuning"]["matbenchmarking"]["enabled"] is False
    assert document["tests"]["llama"] == {"ggml_libs": ["cuda", "rocm"],
                                          "vllm_args": ["--dtype=half", "--max-model-len=4096"]}
    assert presets["light"]["tests.fine_tuning.test_settings.gpu"] == 2  # the edit stays for later applications
    assert "ci_presets" not in document


def test_light_alone_is_untouched_by_the_preset_that_would_edit_it() -> None:
    document, presets = load()
    applied = build(document, presets, "config.yaml", requested=["light"], pr_overrides=[],
                                 var_overrides=[])
    assert applied == ["base", "light"]
    assert document["tests"]["fine_tuning"]["test_settings"]["gpu"] == 1


def test_a_preset_value_is_copied_never_shared() -> None:
    document, presets = load("""
ci_presets:
  big: {tests.hyper: {r: 4, alpha: 16}}
tests: {hyper: {r: 8, alpha: 32}}
""")
    build(document, presets, "c.yaml", requested=["big"], pr_overrides=[], var_overrides=[])
    document["tests"]["hyper"]["r"] = 99
    assert presets["big"]["tests.hyper"] == {"r": 4, "alpha": 16}


def test_pr_overrides_win_over_pr_presets_and_var_wins_last() -> None:
    document, presets = load()
    applied = build(
        document, presets, "config.yaml", requested=["light"],
        pr_overrides=[("tests.fine_tuning.test_settings.gpu", 4), ("tests.llama.ggml_libs[1]", "metal")],
        var_overrides=[("tests.fine_tuning.test_settings.dataset_replication", None)])
    settings = document["tests"]["fine_tuning"]["test_settings"]
    assert applied == ["base", "light"]
    assert settings["gpu"] == 4  # /var applied again after the presets
    assert settings["dataset_replication"] is None  # --var k= is null
    assert document["tests"]["llama"]["ggml_libs"] == ["cpu", "metal"]


def test_inline_references_resolve_when_read_and_follow_changes() -> None:
    document, presets = load()
    build(document, presets, "config.yaml", requested=["light"], pr_overrides=[], var_overrides=[])
    config = Config(document, source="config.yaml")
    assert config.get("tests.fine_tuning.test_settings.dataset_name") == "granite-7b-alpaca"
    assert config.get("tests.fine_tuning.test_settings.run_name") == "run granite-7b on 1 gpus"
    config.set("tests.fine_tuning.test_settings.gpu", 3)
    assert config.get("tests.fine_tuning.test_settings.run_name") == "run granite-7b on 3 gpus"
    assert config.get("tests.llama.ggml_libs[1]") == "rocm"
    with pytest.raises(TopsailError, match="'tests.x' refers to unknown key 'nope'"):
        Config({"tests": {"x": "a {@nope} b"}}).get("tests.x")


def test_secret_file_reference_is_read_and_hidden_everywhere(tmp_path, monkeypatch) -> None:
    canary = "hf_CANARY_secret_file_4242"
    (tmp_path / "hf_token").write_text(canary + "\n")
    monkeypatch.setenv("TEST_SECRET_DIR", str(tmp_path))
    document, presets = load()
    build(document, presets, "config.yaml", requested=[], pr_overrides=[], var_overrides=[])
    config = Config(document, source="config.yaml")
    assert config.as_dict()["tests"]["fine_tuning"]["test_settings"]["hf_token"] == "*$@secrets.hf_token_file"
    assert config.get("tests.fine_tuning.test_settings.hf_token") == canary  # read when read, newline stripped
    # the key "model_card" is no secret name: the value is hidden because it was read from a secret file
    assert redact({"model_card": f"token={canary}"}) == {"model_card": f"token={REDACTED}"}
    assert canary not in redact_text(f"login with {canary} failed")


def test_secret_file_reference_errors_name_what_is_missing(tmp_path, monkeypatch) -> None:
    document, _ = load()
    monkeypatch.delenv("TEST_SECRET_DIR", raising=False)
    config = Config(document, source="config.yaml")
    config.as_dict()  # the start-up check reads no secret file
    with pytest.raises(TopsailError, match="environment variable TEST_SECRET_DIR .*secrets.dir.env_key.* not set"):
        config.get("tests.fine_tuning.test_settings.hf_token")
    monkeypatch.setenv("TEST_SECRET_DIR", str(tmp_path))
    with pytest.raises(TopsailError, match="cannot read the secret file .*hf_token"):
        config.get("tests.fine_tuning.test_settings.hf_token")
    broken = copy.deepcopy(document)
    broken["tests"]["fine_tuning"]["test_settings"]["hf_token"] = "*$@secrets.nope"
    with pytest.raises(TopsailError, match="refers to unknown key 'secrets.nope'"):
        Config(broken, source="config.yaml").as_dict()


def test_bookkeeping_keys_are_not_presets() -> None:
    _, presets = load()
    assert preset_names(presets) == ["base", "light", "gating_smoke", "ilab_scale"]
    document, presets = load()
    with pytest.raises(TopsailError, match="ci_presets.names .*is TOPSAIL's bookkeeping, not a preset"):
        build(document, {**presets, "x": {"extends": ["names"]}}, "c.yaml", requested=["x"],
                           pr_overrides=[], var_overrides=[])


def test_a_refused_preset_edit_hints_at_preset_keys_only() -> None:
    document, presets = load()
    presets["typo"] = {'ci_presets.light["tests.fine_tuning.test_settings.gpus"]': 2}
    with pytest.raises(TopsailError) as raised:
        build(document, presets, "c.yaml", requested=["typo"], pr_overrides=[], var_overrides=[])
    message = str(raised.value)
    assert "preset 'typo' sets 'ci_presets.light[\"tests.fine_tuning.test_settings.gpus\"]'" in message
    assert 'closest existing keys: ci_presets.light["tests.fine_tuning.test_settings.gpu"]' in message
    assert "closest existing keys: tests." not in message  # would change the run, not the preset
    assert closest_config_keys(document, "tests.fine_tuning.test_settings.gpus")[0] == \
        "tests.fine_tuning.test_settings.gpu"


def test_variable_overrides_refuse_unknown_keys_and_list_items_out_of_range() -> None:
    document, presets = load()
    presets["variable_overrides"] = {"tests.fine_tuning.test_settings.gpuz": 1}
    with pytest.raises(TopsailError, match=r"c.yaml: ci_presets.variable_overrides: 'tests.fine_tuning.test_settings"
                                           r".gpuz' is not in the base configuration"):
        build(document, presets, "c.yaml", requested=[], pr_overrides=[], var_overrides=[])
    document, presets = load()
    presets["far"] = {"tests.llama.ggml_libs[5]": "x"}
    with pytest.raises(TopsailError, match=r"preset 'far' sets 'tests.llama.ggml_libs\[5\]', which is not in the "):
        build(document, presets, "c.yaml", requested=["far"], pr_overrides=[], var_overrides=[])


@pytest.mark.parametrize(("key", "parts"), [
    ("a.b.c", ("a", "b", "c")),
    ("a.b[2]", ("a", "b", 2)),
    ('ci_presets.light["tests.x.gpu"]', ("ci_presets", "light", "tests.x.gpu")),
    ("a['x.y'][0].z", ("a", "x.y", 0, "z")),
])
def test_keys_are_jsonpath_like(key: str, parts: tuple) -> None:
    from pytest_topsail.config import format_key, parse_key

    assert parse_key(key) == parts
    assert parse_key(format_key(parts)) == parts


@pytest.mark.parametrize("key", ["a..b", "a.[0]", "a[x]", 'a["x"', "a]", ""])
def test_malformed_keys_are_refused(key: str) -> None:
    from pytest_topsail.config import parse_key

    with pytest.raises(TopsailError, match="invalid configuration key"):
        parse_key(key)


# --- TOPSAIL's algorithm, as docs/configuration.md states it, written independently: every combination agrees ---

def topsail_algorithm(text: str, pr_presets: list[str], overrides: dict) -> tuple[dict, list[str]]:
    import re

    config = yaml.safe_load(text)
    presets = config["ci_presets"]
    names: list[str] = []

    def set_config(key: str, value: object) -> None:
        parts = [int(index) if index else quoted or plain
                 for quoted, index, plain in re.findall(r'\["([^"]+)"\]|\[(\d+)\]|([^.\[\]]+)', key)]
        node = config
        for part in parts[:-1]:
            node = node[part]
        if isinstance(node, dict):
            assert parts[-1] in node, key
        else:
            assert parts[-1] < len(node), key
        node[parts[-1]] = copy.deepcopy(value)

    def apply_preset(name: str) -> None:
        if name not in names:
            names.append(name)
        for key, value in list(presets[name].items()):
            if key == "extends":
                for parent in value:
                    apply_preset(parent)
            else:
                set_config(key, value)

    to_apply = presets.get("to_apply") or []
    for name in [to_apply] if isinstance(to_apply, str) else to_apply:
        apply_preset(name)
    for key, value in (presets.get("variable_overrides") or {}).items():
        set_config(key, value)
    for key, value in overrides.items():
        set_config(key, value)
    for name in pr_presets:
        apply_preset(name)
    for key, value in overrides.items():
        set_config(key, value)
    del config["ci_presets"]
    return config, names


PR_OVERRIDES = {"tests.fine_tuning.test_settings.gpu": 4, "tests.llama.vllm_args[0]": "--dtype=bfloat16"}


@pytest.mark.parametrize("overrides", [{}, PR_OVERRIDES], ids=["no-var", "var"])
def test_every_preset_combination_gives_what_topsail_gives(overrides: dict) -> None:
    import itertools

    names = ["base", "light", "gating_smoke", "ilab_scale"]
    combinations = [[], *([name] for name in names), *(list(pair) for pair in itertools.permutations(names, 2))]
    for requested in combinations:
        expected, expected_names = topsail_algorithm(TOPSAIL_CONFIG, requested, overrides)
        document, presets = load()
        applied = build(document, presets, "config.yaml", requested=requested,
                        pr_overrides=list(overrides.items()), var_overrides=[])
        assert (document, applied) == (expected, expected_names), requested
