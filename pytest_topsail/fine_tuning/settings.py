"""The fine-tuning suite's run options (`SuiteSettings`, ``tests.fine_tuning`` of config.yaml), validated with
pydantic when pytest starts, with every point of the matrix (one point's settings: ``fine_tuning/point.py``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from pytest_topsail.errors import TopsailError
from pytest_topsail.fine_tuning.catalog import builtin_catalog
from pytest_topsail.fine_tuning.manifests import trainer_config
from pytest_topsail.fine_tuning.point import FrozenSettings, validate_point
from pytest_topsail.hardware import SHAPES
from pytest_topsail.settings import validate


class Timeouts(FrozenSettings):
    """Seconds each phase of a point may take before the point fails naming the phase."""

    scheduled: float = Field(120, gt=0)  # job created -> every pod bound to a node
    started: float = Field(600, gt=0)  # bound -> every container running (image pull, volume mounts)
    training: float = Field(7200, gt=0)  # running -> the job succeeded or failed
    no_progress: float = Field(600, gt=0)  # no new log line from the master for this long while training
    cleanup: float = Field(120, gt=0)


class SuiteSettings(FrozenSettings):
    """`tests.fine_tuning` of suites/fine_tuning/config.yaml."""

    namespace: str = Field("fine-tuning-testing", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=50)
    preflight: Literal["skip", "run", "fail"] = "skip"  # a point whose memory estimate exceeds the GPU memory
    gpu_memory_gb: float | None = Field(None, gt=0)  # GPU memory for the pre-flight; None: read from the nodes
    memory_reserve_gb: float = Field(2.0, ge=0)  # CUDA context, allocator fragmentation
    timeouts: Timeouts = Field(default_factory=Timeouts)
    keep: bool = False  # leave the job and its pods on the cluster
    progress: bool = True
    catalog: dict[str, Any] = Field(default_factory=dict)  # extra models/datasets ({models: {...}, datasets: {...}})
    # an image with pytest_topsail: a pod of it writes the catalog's tiny models and datasets onto the storage PVC
    storage_setup_image: str | None = None
    max_points: int = Field(500, ge=1)  # a bigger matrix refuses to run unless this is raised to its size

    @model_validator(mode="after")
    def _check_points(self, info: ValidationInfo) -> SuiteSettings:
        """Every point of the suite's matrix checked at start-up against the catalog (set by the engine's validation
        context), not at its item after deploying."""
        suite = (info.context or {}).get("suite")
        if suite is not None:
            try:
                check_points(suite.cases, self, suite.config.get("cluster.sim", None) or {})
            except TopsailError as error:
                raise ValueError(str(error)) from None
        return self


def check_points(cases: list[Any], settings: SuiteSettings, sim: dict[str, Any] | None = None) -> None:
    """The matrix's size, each point's model, dataset, sequence length and LoRA settings; one TopsailError naming
    the case file and case otherwise. `sim`: the suite's ``cluster.sim`` (the GPUs and performance model of the
    matrix's time estimate)."""
    if len(cases) > settings.max_points:
        raise TopsailError(f"the matrix has {len(cases)} points, more than max_points ({settings.max_points}): each "
                           f"point is one PyTorchJob; {matrix_estimate(cases, settings, sim or {})}; set "
                           f"tests.fine_tuning.max_points to at least {len(cases)} to run it")
    catalog = builtin_catalog().extended(settings.catalog, "tests.fine_tuning.catalog")
    lora_methods: dict[tuple[str, str], set[str]] = {}
    for case in cases:
        where = f"{case.source} (case {case.id})"
        point = validate_point(case.settings, where)
        model = catalog.model(point.model, where)
        catalog.dataset(point.dataset.name, where)
        if point.max_seq_length > model.max_length:
            raise TopsailError(f"{where}: max_seq_length {point.max_seq_length} is beyond the maximum of model "
                               f"{point.model} ({model.max_length} positions)")
        point.resolved(catalog, where)
        if "lora" in case.settings:
            lora_methods.setdefault((case.source, case.name), set()).add(point.method)
    for (source, name), methods in lora_methods.items():
        if methods == {"full"}:
            raise TopsailError(f"{source} (case {name}): lora settings given, but every point uses method: full "
                               "(they apply to method lora or qlora only)")


ESTIMATE_SAMPLE = 24  # points of a big matrix whose training time is computed (evenly spread), the rest scaled


def matrix_estimate(cases: list[Any], settings: SuiteSettings, sim: dict[str, Any]) -> str:
    """How long the matrix would train by the simulator's performance model, on the GPUs of the suite's
    ``cluster.sim`` (its shape or first pool): the expected time on such GPUs and on the simulator."""
    from pytest_topsail.fine_tuning.simulation import FineTuningModel, Job, expected_run_seconds  # numpy: on demand

    gpu_profile = str(SHAPES.get(str(sim.get("shape")), {}).get("gpu_profile") or sim.get("gpu_profile") or "a100")
    try:
        model = FineTuningModel.model_validate(((sim.get("plugins") or {}).get("fine_tuning")) or {})
    except ValueError:
        model = FineTuningModel()
    catalog = builtin_catalog().extended(settings.catalog, "tests.fine_tuning.catalog")
    step = max(1, len(cases) // ESTIMATE_SAMPLE)
    sampled = []
    for case in cases[::step][:ESTIMATE_SAMPLE]:
        point = validate_point(case.settings, f"{case.source} (case {case.id})").resolved(catalog, case.id)
        job = Job({}, point.model, point.dataset.name, point.dataset.replication, point.gpus_per_pod, point.pods, 0)
        sampled.append(expected_run_seconds(trainer_config(point), job, gpu_profile, model))
    if not sampled or not any(sampled):
        return f"no time estimate for GPU profile {gpu_profile}"
    total = sum(sampled) / len(sampled) * len(cases)
    return (f"training alone takes about {_duration(total)} on {gpu_profile} GPUs by the simulator's performance "
            f"model ({_duration(total * model.time_scale)} on the simulator at time_scale {model.time_scale:g}, "
            "plus each job's start and cleanup)")


def _duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s" if seconds >= 60 else f"{seconds:.1f} s"


def validate_suite(settings: dict[str, Any] | None, where: str) -> SuiteSettings:
    return validate(SuiteSettings, settings or {}, where, "invalid settings")
