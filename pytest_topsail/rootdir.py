"""The rootdir and ini file of a run, chosen again once the plugin's options are known.

pytest picks the rootdir from the command line's paths before the installed plugins are loaded, so the value of a
plugin option written with a space (``--kubeconfig ~/.kube/config``, ``--topsail-history h.sqlite``, ``--artifacts
DIR``) is taken for a path to test when it exists: the rootdir becomes its directory, the project's ini file
(testpaths, topsail_suites) is not read and the suites are not found. Written with ``=``, the same option works.
``fix_rootdir`` runs first in ``pytest_load_initial_conftests``, when the plugins' options are registered: it parses
the arguments again and, when pytest's choice came from an option value, makes the choice pytest makes for the
``=`` form.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest


def fix_rootdir(config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    from _pytest.config import findpaths

    namespace = parser.parse_known_args(args)
    wanted: dict[str, Any] = {
        "inifile": namespace.inifilename, "override_ini": namespace.override_ini, "args": namespace.file_or_dir,
        "rootdir_cmd_arg": namespace.rootdir or None, "invocation_dir": config.invocation_params.dir,
    }
    accepted = inspect.signature(findpaths.determine_setup).parameters
    rootpath, inipath, inicfg, *rest = findpaths.determine_setup(
        **{key: value for key, value in wanted.items() if key in accepted})
    if (rootpath, inipath) == (config.rootpath, config.inipath):
        return
    old_inipath = config.inipath
    old_cut = str(old_inipath.parent) if old_inipath is not None else str(config.rootpath)
    config._rootpath = rootpath
    config._inipath = inipath
    config._inicfg = inicfg
    if rest and hasattr(config, "_ignored_config_files"):
        config._ignored_config_files = rest[0]
    config._inicache.clear()
    parser.extra_info["rootdir"] = str(rootpath)
    parser.extra_info["inifile"] = str(inipath)
    known = config.known_args_namespace
    if known.confcutdir == old_cut:  # derived from the wrong choice, not given by the user
        known.confcutdir = str(inipath.parent) if inipath is not None else str(rootpath)
    if old_inipath is None and inipath is not None:  # the project's addopts were not read: read them now
        args[:] = [*config._validate_args(config.getini("addopts"), "via addopts config"), *args]
