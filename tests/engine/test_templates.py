"""command_args.yaml.j2: rendering with the configuration, filters, lookup with prefix/suffix, extra, SET_AT_RUNTIME."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.templates import command_args

CONFIG = Config({"tests": {"scale": {"namespace": "scale-test", "jobs": 10, "image": ""}},
                 "cluster": {"name": "sim"}}, source="suites/s/config.yaml")

TEMPLATE = """\
scale submit:
  namespace: {{ tests.scale.namespace }}
  jobs: {{ tests.scale.jobs }}
  _note: private keys are dropped
pre/scale submit:
  namespace: pre-{{ tests.scale.namespace }}
scale submit/post:
  namespace: {{ tests.scale.namespace }}-post
scale image:
  image: {{ tests.scale.image | or_env("SCALE_IMAGE") }}
scale wait:
  pod_name: SET_AT_RUNTIME
  timeout: 60
"""


@pytest.fixture
def suite_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SCALE_IMAGE", "quay.io/x:1")  # the whole template renders for any lookup
    (tmp_path / "command_args.yaml.j2").write_text(TEMPLATE)
    return tmp_path


def test_lookup_renders_with_config_and_drops_private_keys(suite_dir: Path) -> None:
    assert command_args(suite_dir, CONFIG, "scale submit") == {"namespace": "scale-test", "jobs": 10}


def test_prefix_and_suffix_select_their_own_entries(suite_dir: Path) -> None:
    assert command_args(suite_dir, CONFIG, "scale submit", prefix="pre") == {"namespace": "pre-scale-test"}
    assert command_args(suite_dir, CONFIG, "scale submit", suffix="post") == {"namespace": "scale-test-post"}


def test_rendering_follows_config_changes(suite_dir: Path) -> None:
    config = Config(CONFIG.as_dict(), source="s")
    config.set("tests.scale.jobs", 99)
    assert command_args(suite_dir, config, "scale submit")["jobs"] == 99


def test_or_env_filter(suite_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert command_args(suite_dir, CONFIG, "scale image") == {"image": "quay.io/x:1"}
    monkeypatch.delenv("SCALE_IMAGE")
    with pytest.raises(TopsailError, match=r"command_args.yaml.j2:10: .*SCALE_IMAGE is not set"):
        command_args(suite_dir, CONFIG, "scale image")


def test_set_at_runtime_needs_extra(suite_dir: Path) -> None:
    with pytest.raises(TopsailError, match=r"'scale wait': pod_name still SET_AT_RUNTIME"):
        command_args(suite_dir, CONFIG, "scale wait")
    args = command_args(suite_dir, CONFIG, "scale wait", extra={"pod_name": "p-1", "timeout": 5})
    assert args == {"pod_name": "p-1", "timeout": 5}


def test_unknown_command_lists_the_defined_ones(suite_dir: Path) -> None:
    with pytest.raises(TopsailError, match=r"no command 'scale submitt'; commands defined: scale submit, "
                                           r"pre/scale submit, scale submit/post"):
        command_args(suite_dir, CONFIG, "scale submitt")


def test_raise_exception_and_undefined_variable_name_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "command_args.yaml.j2").write_text(
        "a b:\n  x: 1\n{% if cluster.name == 'sim' %}{{ 'no sim here' | raise_exception }}{% endif %}\n")
    with pytest.raises(TopsailError, match=r"command_args.yaml.j2:3: no sim here"):
        command_args(tmp_path, CONFIG, "a b")
    (tmp_path / "command_args.yaml.j2").write_text("a b:\n  x: {{ tests.scale.namespce }}\n")
    with pytest.raises(TopsailError, match=r"command_args.yaml.j2:2: undefined variable .*namespce"):
        command_args(tmp_path, CONFIG, "a b")
