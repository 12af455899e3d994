"""The run state of one pytest process: suites root, presets, ``--var`` overrides, run id, artifacts root.

Read once from the options (``state_of``) and kept in ``config.stash``; ``pytest_topsail.suites`` loads the suites
with it (and keeps them in the stash too). An xdist worker takes the run id and artifacts root of its controller
(``Role.workerinput``), so every process of a run writes to one tree.
"""

from __future__ import annotations

import datetime
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_topsail.artifacts import ARTIFACT_DIR_ENV
from pytest_topsail.config import parse_var
from pytest_topsail.errors import TopsailError
from pytest_topsail.xdist_role import ARTIFACTS_INPUT, RUN_ID_INPUT, SINGLE, Role, role_of

if TYPE_CHECKING:
    from pytest_topsail.pr_args import PrArgs

PRESET_ENV = "TOPSAIL_PRESET"


@dataclass
class TopsailState:
    """Per-session state of the engine (kept in ``config.stash``)."""

    rootdir: Path
    suites_root: Path
    artifacts_root: Path
    run_id: str
    presets: list[str]
    overrides: list[tuple[str, Any]]
    in_scope: list[str] = field(default_factory=list)
    written_suite_configs: set[str] = field(default_factory=set)
    suite_of_path_cache: dict[Path, str | None] = field(default_factory=dict)
    pytest_cache: Any = None  # pytest's config.cache (None with -p no:cacheprovider)
    cluster: str = "sim"  # the cluster the run uses: sim (the simulator) or kube (a real cluster)
    role: Role = SINGLE  # this process's xdist role
    lock: threading.RLock = field(default_factory=threading.RLock)
    pr_args_option: str | None = None  # --topsail-pr-args
    invocation_dir: Path = field(default_factory=Path.cwd)
    _pr_args: PrArgs | None = None

    @property
    def pr_args(self) -> PrArgs:
        """The PR directives of the run (``pytest_topsail.pr_args``), read on first use: a run that reaches no suite
        reads nothing."""
        if self._pr_args is None:
            from pytest_topsail.pr_args import read_pr_args

            self._pr_args = read_pr_args(self.pr_args_option, self.invocation_dir)
        return self._pr_args


STATE_KEY = pytest.StashKey[TopsailState]()


def state_of(pytest_config: pytest.Config) -> TopsailState:
    state = pytest_config.stash.get(STATE_KEY, None)
    if state is None:
        state = init_state(pytest_config)
    return state


def init_state(pytest_config: pytest.Config) -> TopsailState:
    """Read the options once: suites root, presets, ``--var`` overrides, artifacts root (chosen, not created)."""
    role = role_of(pytest_config)
    rootdir = Path(pytest_config.rootpath)
    ini_value = pytest_config.getini("topsail_suites") or "suites"
    base = Path(pytest_config.inipath).parent if pytest_config.inipath else rootdir
    if ARTIFACTS_INPUT in role.workerinput:
        run_id = role.workerinput[RUN_ID_INPUT]
        root = Path(role.workerinput[ARTIFACTS_INPUT])
    else:
        run_id = new_run_id()
        root = choose_artifacts_root(pytest_config.getoption("topsail_artifacts", None),
                                     Path(pytest_config.invocation_params.dir), run_id)
    state = TopsailState(
        rootdir=rootdir,
        suites_root=(base / ini_value).resolve(),
        artifacts_root=root,
        run_id=run_id,
        presets=_requested_presets(preset_values(pytest_config)),
        overrides=[parse_var(text) for text in pytest_config.getoption("topsail_vars", None) or []],
        pytest_cache=getattr(pytest_config, "cache", None),
        cluster=chosen_cluster(pytest_config),
        role=role,
        pr_args_option=pytest_config.getoption("topsail_pr_args", None),
        invocation_dir=Path(pytest_config.invocation_params.dir),
    )
    pytest_config.stash[STATE_KEY] = state
    return state


def chosen_cluster(pytest_config: pytest.Config) -> str:
    """``--cluster``; without it, kube when --kubeconfig or --context names a real cluster, else sim."""
    chosen = pytest_config.getoption("topsail_cluster", None)
    if chosen:
        return str(chosen)
    explicit = pytest_config.getoption("topsail_kubeconfig", None) or pytest_config.getoption("topsail_context", None)
    return "kube" if explicit else "sim"


def new_run_id() -> str:
    return f"{datetime.datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def choose_artifacts_root(option: str | None, invocation_dir: Path, run_id: str) -> Path:
    """``--artifacts DIR``, else ``$ARTIFACT_DIR``, else ``./artifacts/<run-id>`` (not created here)."""
    if option:
        return (invocation_dir / option).resolve()
    env = os.environ.get(ARTIFACT_DIR_ENV)
    if env:
        return (invocation_dir / env).resolve()
    return (invocation_dir / "artifacts" / run_id).resolve()


def artifacts_root(pytest_config: pytest.Config) -> Path:
    """The artifacts root of a pytest run, created on first use."""
    root = state_of(pytest_config).artifacts_root
    root.mkdir(parents=True, exist_ok=True)
    return root


def preset_values(pytest_config: pytest.Config) -> list[str]:
    """``--preset`` values; without any, $TOPSAIL_PRESET; without it, the ``topsail_presets`` ini key.

    IDE runners drop an option's separate value (``--preset smoke``): the environment and the ini file give them a
    way to choose presets that survives that.
    """
    from_option = pytest_config.getoption("topsail_presets", None) or []
    if from_option:
        return list(from_option)
    from_env = os.environ.get(PRESET_ENV, "").strip()
    if from_env:
        return [from_env]
    try:
        from_ini = pytest_config.getini("topsail_presets")
    except ValueError:  # the ini key is not registered (plugin disabled)
        return []
    return [from_ini] if isinstance(from_ini, str) and from_ini.strip() else list(from_ini or [])


def _requested_presets(values: list[str]) -> list[str]:
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name:
                raise TopsailError(f"--preset {value!r}: empty preset name (give names like --preset smoke or "
                                   "--preset smoke,dgx)")
            if name not in names:
                names.append(name)
    return names
