"""command_args.yaml.j2: rendered from the effective configuration with TOPSAIL's filters, selected by
[prefix/]group command[/suffix], extra overriding; an undefined variable names the file, the line and the key."""

from __future__ import annotations

import pytest

from pytest_topsail.config import Config
from pytest_topsail.errors import TopsailError
from pytest_topsail.templates import command_key, render_template, select

TEMPLATE = """\
_defaults: &defaults
  namespace: {{ tests.namespace }}
rhods deploy_ods:
  catalog_image: {{ rhods.catalog.image | tojson }}
  tag: {{ rhods.catalog.tag }}
  _unused: dropped
sutest/cluster set_scale:
  <<: *defaults
  scale: {{ clusters.sutest.compute.machineset.count }}
  name: {{ name | or_env("TEST_TEMPLATE_NAME") }}
driver/cluster set_scale:
  scale: {{ clusters.driver.count }}
storage download_to_pvc/model:
  source: {{ tests.source }}
  name: SET_AT_RUNTIME
"""
CONFIG = {"tests": {"namespace": "ft", "source": "{@tests.namespace}-models"},
          "rhods": {"catalog": {"image": "quay.io/rhoai/fbc", "tag": "2.16"}},
          "clusters": {"sutest": {"compute": {"machineset": {"count": 3}}}, "driver": {"count": 1}}, "name": ""}


def render(tmp_path, text: str, config: dict) -> dict:
    path = tmp_path / "command_args.yaml.j2"
    path.write_text(text)
    return render_template(path, Config(config).as_dict(), "suites/ft/command_args.yaml.j2")


def test_entries_by_prefix_group_command_suffix_with_extra(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TEST_TEMPLATE_NAME", "from-env")
    commands = render(tmp_path, TEMPLATE, CONFIG)
    assert list(commands) == ["rhods deploy_ods", "sutest/cluster set_scale", "driver/cluster set_scale",
                              "storage download_to_pvc/model"]
    assert commands["rhods deploy_ods"] == {"catalog_image": "quay.io/rhoai/fbc", "tag": 2.16}
    assert select(commands, command_key("cluster", "set_scale", prefix="sutest"), None, "t") == {
        "namespace": "ft", "scale": 3, "name": "from-env"}
    key = command_key("storage", "download_to_pvc", suffix="model")
    assert select(commands, key, {"name": "pvc-1"}, "t") == {"source": "ft-models", "name": "pvc-1"}
    with pytest.raises(TopsailError, match=r"t: no entry 'cluster set_scale' \(entries: 'rhods deploy_ods', "):
        select(commands, "cluster set_scale", None, "t")


def test_undefined_variable_names_file_line_and_key(tmp_path) -> None:
    config = {**CONFIG, "name": "n", "clusters": {"sutest": {"compute": {"machineset": {"count": 3}}}}}
    with pytest.raises(TopsailError) as raised:
        render(tmp_path, TEMPLATE, config)
    assert str(raised.value) == ("suites/ft/command_args.yaml.j2:12: undefined variable: 'dict object' has no "
                                 "attribute 'driver' (in: scale: {{ clusters.driver.count }})")


def test_raise_exception_and_log_warning(tmp_path, caplog) -> None:
    text = "a b:\n  x: {{ 'check this' | log_warning }}\n  y: {{ 'refused: no GPU' | raise_exception }}\n"
    with pytest.raises(TopsailError, match=r"command_args.yaml.j2:3: refused: no GPU"):
        render(tmp_path, text, {})
    assert "check this" in caplog.text
    with pytest.raises(TopsailError, match=r"command_args.yaml.j2:1: no value, and the environment variable "
                                           r"NOPE_NOT_SET is not set \(or_env\)"):
        render(tmp_path, "a b: {x: {{ '' | or_env('NOPE_NOT_SET') }}}\n", {})


SUITE_CONFIG = """
cases: [cases/default.yaml]
tests:
  ft: {gpus: 8, image: quay.io/ft/trainer}
ci_presets:
  small: {tests.ft.gpus: 1}
"""
SUITE_TEMPLATE = """\
fine_tuning run_fine_tuning_job:
  gpus: {{ tests.ft.gpus }}
  image: {{ tests.ft.image }}
sutest/fine_tuning run_fine_tuning_job/big:
  gpus: {{ tests.ft.gpus * 2 }}
"""
SUITE_TESTS = """
import pytest_topsail as topsail

def test_args(topsail_config):
    print("ARGS", topsail.command_args("fine_tuning", "run_fine_tuning_job"))
    print("BIG", topsail.command_args("fine_tuning", "run_fine_tuning_job", prefix="sutest", suffix="big",
                                      extra={"name": "job-1"}))
"""


def suite_project(make_project, template: str = SUITE_TEMPLATE) -> pytest.Pytester:
    return make_project({"suites/ft/config.yaml": SUITE_CONFIG, "suites/ft/command_args.yaml.j2": template,
                         "suites/ft/test_ft.py": SUITE_TESTS, "cases/default.yaml": "- name: one\n"})


def test_a_suite_reads_its_arguments_from_the_effective_configuration(make_project) -> None:
    pytester = suite_project(make_project)
    result = pytester.runpytest("suites", "-s", "--preset", "small")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*ARGS {'gpus': 1, 'image': 'quay.io/ft/trainer'}*",
                                 "*BIG {'gpus': 2, 'name': 'job-1'}*"])


def test_an_undefined_variable_fails_at_start_up_naming_the_line(make_project) -> None:
    pytester = suite_project(make_project, SUITE_TEMPLATE.replace("tests.ft.image", "tests.ft.imag"))
    result = pytester.runpytest("suites")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*suites/ft/command_args.yaml.j2:3: undefined variable: 'dict object' has no "
                                 "attribute 'imag' (in: image: {{ tests.ft.imag }})"])
    assert "passed" not in result.stdout.str()
