"""Scale tests: a job submitter with QPS/burst pacing, the lifecycle sampler of the submitted jobs and pods, latency
tables and plots (docs/scale.md).

The front: suites use the names of ``__all__`` (``from pytest_topsail.scale import run_case``), never a module of the
package: one scale case run on the cluster (``ScaleCase``, ``RunOptions``, ``run_case`` -> ``ScaleResult``), its
analysis from the artifacts again (``analyse_directory``), the latency metrics and thresholds (``METRICS``,
``Threshold``, ``find``) and the lifecycle steps they are measured between (``JOB_STEPS``, ``POD_STEPS``), the
lifecycles of any resource the sampler times (``Lifecycle``, ``BUILTIN_LIFECYCLES``, ``parse_lifecycles``,
``Sampler``). Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_topsail.fronts import lazy_front

# public name -> module defining it
_EXPORTS = {
    "describe_faults": "pytest_topsail.scale.faults",
    "METRICS": "pytest_topsail.scale.latency",
    "Threshold": "pytest_topsail.scale.latency",
    "find": "pytest_topsail.scale.latency",
    "RunOptions": "pytest_topsail.scale.run",
    "ScaleCase": "pytest_topsail.scale.run",
    "ScaleResult": "pytest_topsail.scale.run",
    "analyse_directory": "pytest_topsail.scale.run",
    "run_case": "pytest_topsail.scale.run",
    "BUILTIN_LIFECYCLES": "pytest_topsail.scale.lifecycle",
    "Lifecycle": "pytest_topsail.scale.lifecycle",
    "parse_lifecycles": "pytest_topsail.scale.lifecycle",
    "Sampler": "pytest_topsail.scale.sampler",
    "JOB_STEPS": "pytest_topsail.scale.timelines",
    "POD_STEPS": "pytest_topsail.scale.timelines",
}
__all__ = [
    "BUILTIN_LIFECYCLES", "JOB_STEPS", "Lifecycle", "METRICS", "POD_STEPS", "RunOptions", "Sampler", "ScaleCase",
    "ScaleResult", "Threshold", "analyse_directory", "describe_faults", "find", "parse_lifecycles", "run_case",
]

if TYPE_CHECKING:
    from pytest_topsail.scale.faults import describe_faults
    from pytest_topsail.scale.latency import METRICS, Threshold, find
    from pytest_topsail.scale.lifecycle import BUILTIN_LIFECYCLES, Lifecycle, parse_lifecycles
    from pytest_topsail.scale.run import RunOptions, ScaleCase, ScaleResult, analyse_directory, run_case
    from pytest_topsail.scale.sampler import Sampler
    from pytest_topsail.scale.timelines import JOB_STEPS, POD_STEPS

__getattr__, __dir__ = lazy_front(__name__, _EXPORTS)
