"""The simulator's controllers: small, independent, each reacting to store events with timings from the profile.

`await start_controllers(store, profile)` starts every controller of the run in the running asyncio loop (the API
server's) and returns a `Controllers` handle whose `await stop()` stops them in reverse order. The controllers of a
run: the built-in ones (`CONTROLLERS`), then those installed packages declare in the entry-point group
`pytest_topsail.sim_controllers` (value "module:Class"), then the profile's `controllers:` ("module:Class" or
"path/to/file.py:Class"): a suite brings its own simulated operator without editing this list. A controller is a
`Controller` subclass (base.py) using the store through the `Store` Protocol (storeapi.py); a plugin's settings live
under the profile's `plugins.<controller name>`, checked by `check_plugin_settings` when the profile is built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_topsail.sim.controllers.base import Controller
    from pytest_topsail.sim.controllers.profile import Profile
    from pytest_topsail.sim.controllers.storeapi import Store

# "module:Class", started in this order (nodes first so that the scheduler sees them).
CONTROLLERS: list[str] = [
    "pytest_topsail.sim.controllers.nodes:NodeController",
    "pytest_topsail.sim.controllers.scheduler:Scheduler",
    "pytest_topsail.sim.controllers.pods:PodLifecycle",
    "pytest_topsail.sim.controllers.faults:FaultInjector",  # faults.events of the profile (nothing without)
    "pytest_topsail.sim.controllers.jobs:JobController",
    "pytest_topsail.sim.controllers.deployments:DeploymentController",
    "pytest_topsail.sim.controllers.services:ServiceController",
    "pytest_topsail.sim.controllers.pvcs:VolumeController",
    "pytest_topsail.sim.controllers.rhoai:RhoaiController",  # OpenShift AI components' CRDs (DataScienceCluster)
    "pytest_topsail.sim.controllers.pytorchjob:PyTorchJobController",
    "pytest_topsail.sim.controllers.kueue:KueueController",  # Kueue's CRDs, Job webhook and admission
    "pytest_topsail.sim.controllers.olm:OlmController",
    "pytest_topsail.sim.controllers.stages:StagesController",  # NFD, GPU operator, OpenShift AI as data
    "pytest_topsail.sim.controllers.gpuoperator:GpuOperatorController",  # NFD's and the GPU operator's node labels
]


ENTRY_POINT_GROUP = "pytest_topsail.sim_controllers"


def run_specs(profile: Profile) -> list[str]:
    """The controllers of a run: built-in, then entry points, then the profile's, without repeats."""
    from importlib.metadata import entry_points

    installed = [entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)]
    return list(dict.fromkeys([*CONTROLLERS, *installed, *profile.controllers]))


def controller_class(spec: str) -> type[Controller]:
    """The class a spec names; a TopsailError naming the spec when it cannot be loaded or is no Controller."""
    from pytest_topsail.errors import TopsailError
    from pytest_topsail.sim.controllers.base import Controller

    module_name, _, class_name = spec.partition(":")
    try:
        if module_name.endswith(".py"):
            from pytest_topsail.settings import load_module

            module = load_module(Path(module_name), "topsail_sim_controller")
        else:
            module = importlib.import_module(module_name)
        found = getattr(module, class_name)
    except (ImportError, AttributeError, TopsailError) as exc:
        raise TopsailError(f"simulator controller {spec!r} cannot be loaded: {exc}") from None
    if not (isinstance(found, type) and issubclass(found, Controller)):
        raise TopsailError(f"simulator controller {spec!r} is not a subclass of "
                           "pytest_topsail.sim.controllers.base.Controller")
    return found


def check_plugin_settings(profile: Profile, source: str) -> None:
    """A TopsailError naming the key when `plugins.<name>` of the profile is invalid for its controller, or names no
    controller of the run that takes settings. Controllers given by file path are loaded by the simulator only (their
    path may still be relative here): settings for a name no other controller owns are then left to them."""
    from pydantic import ValidationError

    from pytest_topsail.errors import TopsailError, describe_validation_error

    specs = [spec for spec in run_specs(profile) if not spec.partition(":")[0].endswith(".py")]
    owners = {cls.name: cls for cls in map(controller_class, specs) if cls.settings_model is not None}
    for name, data in profile.plugins.items():
        owner = owners.get(name)
        if owner is None or owner.settings_model is None:
            if len(specs) < len(run_specs(profile)):
                continue
            known = ", ".join(sorted(owners)) or "none"
            raise TopsailError(f"{source}: plugins.{name}: no simulator controller of this run takes settings "
                               f"called {name!r}; known: {known}")
        try:
            owner.settings_model.model_validate(data)
        except ValidationError as exc:
            raise TopsailError(describe_validation_error(exc, source, "invalid simulator plugin settings",
                                                         owner.settings_model, under=f"plugins.{name}")) from None


@dataclass
class Controllers:
    """The running controllers, by name."""

    running: list[Controller] = field(default_factory=list)

    def __getitem__(self, name: str) -> Controller:
        for controller in self.running:
            if controller.name == name:
                return controller
        raise KeyError(name)

    async def stop(self) -> None:
        for controller in reversed(self.running):
            await controller.stop()
        self.running.clear()


async def start_controllers(store: Store, profile: Profile, specs: list[str] | None = None) -> Controllers:
    """Start the controllers named by `specs` (default: those of the run, `run_specs`) against an in-process store."""
    controllers = Controllers()
    try:
        for spec in run_specs(profile) if specs is None else specs:
            controller = controller_class(spec)(store, profile)
            await controller.start()
            controllers.running.append(controller)
    except BaseException:
        await controllers.stop()
        raise
    return controllers
