"""The simulator's controllers: small, independent, each reacting to store events with timings from the profile.

`await start_controllers(store, profile)` starts every controller of `CONTROLLERS` in the running asyncio loop
(the API server's) and returns a `Controllers` handle whose `await stop()` stops them in reverse order.
To add a controller, write a module with a `Controller` subclass (see base.py) and add one line to `CONTROLLERS`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_topsail.sim.controllers.base import Controller
    from pytest_topsail.sim.profile import Profile

# "module:Class", started in this order (nodes first so that the scheduler sees them).
CONTROLLERS: list[str] = [
    "pytest_topsail.sim.controllers.nodes:NodeController",
    "pytest_topsail.sim.controllers.scheduler:Scheduler",
    "pytest_topsail.sim.controllers.pods:PodLifecycle",
    "pytest_topsail.sim.controllers.jobs:JobController",
    "pytest_topsail.sim.controllers.deployments:DeploymentController",
    "pytest_topsail.sim.controllers.services:ServiceController",
    "pytest_topsail.sim.controllers.pvcs:VolumeController",
    "pytest_topsail.sim.controllers.pytorchjob:PyTorchJobController",
    "pytest_topsail.sim.controllers.olm:OlmController",
    "pytest_topsail.sim.controllers.gpu_operator:GpuOperatorController",
    "pytest_topsail.sim.controllers.rhoai:RhoaiController",
    "pytest_topsail.sim.controllers.kserve:KServeController",
]


def controller_class(spec: str) -> type[Controller]:
    module_name, _, class_name = spec.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


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


async def start_controllers(store: Any, profile: Profile, specs: list[str] | None = None) -> Controllers:
    """Start the controllers named by `specs` (default: all of CONTROLLERS) against an in-process store."""
    controllers = Controllers()
    try:
        for spec in CONTROLLERS if specs is None else specs:
            controller = controller_class(spec)(store, profile)
            await controller.start()
            controllers.running.append(controller)
    except BaseException:
        await controllers.stop()
        raise
    return controllers
