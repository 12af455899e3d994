"""The simulator profile's data model: node pools, lifecycle stage timings, faults, seed, extra controllers and their
plugin settings, real workloads, what is preinstalled (`preinstalled`: nothing by default, a fresh cluster). What
the controllers and the API server of a run are told (immutable pydantic models).

`Profile.from_dict(data, source=...)` checks a mapping against the model (shortcut keys `nodes`, `gpu_profile`,
`gpus_per_node` on the first pool); any mistake is one TopsailError naming the source and the key. The plugin settings
are checked against the controllers of the run by `pytest_topsail.sim.run.profile.build_profile`, the one path from
what a user wrote to a profile (this module imports no controller, so that the controllers may import it). The
reference is docs/simulator-profile.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pytest_topsail.errors import TopsailError, describe_validation_error
from pytest_topsail.hardware import GpuProfile, get_gpu_profile
from pytest_topsail.kube.quantity import parse_cpu_millis, parse_memory_bytes
from pytest_topsail.sim.node.realworkload import RuntimeEntry

SHORTCUT_KEYS = ("nodes", "gpu_profile", "gpus_per_node")
# What a cluster may have installed before the run (docs/simulator-profile.md "Fresh cluster"); "all" = every one.
PREINSTALLABLE = ("gpu_operator", "trainingoperator", "kserve", "kueue")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # "8" is no number, "false" no boolean


class Stage(_Model):
    """A delay before the next step: `delay_ms` plus a random part in [0, jitter_ms) drawn from the seeded RNG."""

    delay_ms: float = Field(0, ge=0)
    jitter_ms: float = Field(0, ge=0)


class Taint(_Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class NodePool(_Model):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=40)
    count: int = Field(1, ge=0, le=100_000)
    gpu_profile: str = "a100"
    gpus_per_node: int | None = Field(None, ge=0, le=64)  # None: the GPU profile's default
    cpu: str | None = None  # None: the GPU profile's default
    memory: str | None = None
    pods: int = Field(110, ge=1, le=10_000)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    not_ready: int = Field(0, ge=0)  # how many of the pool's nodes stay NotReady

    @field_validator("gpu_profile")
    @classmethod
    def _known_gpu_profile(cls, value: str) -> str:
        get_gpu_profile(value)
        return value

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu_quantity(cls, value: Any) -> str | None:
        if value is None:
            return None
        parse_cpu_millis(str(value))
        return str(value)

    @field_validator("memory", mode="before")
    @classmethod
    def _memory_quantity(cls, value: Any) -> str | None:
        if value is None:
            return None
        parse_memory_bytes(str(value))
        return str(value)

    @model_validator(mode="after")
    def _not_ready_within_count(self) -> NodePool:
        if self.not_ready > self.count:
            raise ValueError(f"not_ready ({self.not_ready}) is larger than count ({self.count})")
        return self

    @property
    def gpu(self) -> GpuProfile:
        return get_gpu_profile(self.gpu_profile)

    @property
    def gpu_count(self) -> int:
        return self.gpu.gpus_per_node if self.gpus_per_node is None else self.gpus_per_node

    @property
    def node_cpu(self) -> str:
        return self.cpu or self.gpu.cpu

    @property
    def node_memory(self) -> str:
        return self.memory or self.gpu.memory


class PodStages(_Model):
    """Pod lifecycle, kwok-style. Each stage starts when the previous one is done."""

    schedule: Stage = Stage()  # creation -> bound to a node (PodScheduled)
    initialize: Stage = Stage(delay_ms=20, jitter_ms=20)  # bound -> Initialized, containers being created
    start: Stage = Stage(delay_ms=50, jitter_ms=50)  # -> containers running, phase Running
    ready: Stage = Stage()  # running -> Ready / ContainersReady (readiness probe time)
    complete: Stage = Stage(delay_ms=1000)  # run time of a Job's pod whose command says nothing about it
    restart_backoff: Stage = Stage(delay_ms=1000)  # before a container restarts (doubles, at most 30 s)


class NodeTimings(_Model):
    ready: Stage = Stage()  # node created -> Ready


class SyncTimings(_Model):
    sync: Stage = Stage()  # a controller's reaction time before it acts


class VolumeTimings(_Model):
    bind: Stage = Stage(delay_ms=10)  # PVC created -> Bound
    storage_class: str = "standard"  # used for claims that name none


class ApiFault(_Model):
    """Applied by the API server: requests matching verb and resource fail with `code` at `error_rate`, and all
    matching requests get `latency_ms` more."""

    verb: Literal["*", "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"] = "*"
    resource: str = "*"  # plural name ("pods"), "group/plural" ("batch/jobs") or "*"
    error_rate: float = Field(0.0, ge=0.0, le=1.0)
    code: Literal[429, 500, 503] = 500
    latency_ms: float = Field(0.0, ge=0.0)

    def matches(self, verb: str, resource: str, group: str = "") -> bool:
        if self.verb not in ("*", verb):
            return False
        return self.resource in ("*", resource, f"{group}/{resource}")


class PodSelector(_Model):
    namespace: str | None = None
    name_prefix: str | None = None
    match_labels: dict[str, str] = Field(default_factory=dict)

    def matches(self, namespace: str, name: str, labels: dict[str, str]) -> bool:
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.name_prefix is not None and not name.startswith(self.name_prefix):
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items())


class PodFault(_Model):
    """Pods matching `selector` (all pods when empty), a `fraction` of them chosen by the seed, `fail` (container
    exits with `exit_code` after `after_ms` of running), `never_schedule` (stay Pending, Unschedulable) or `hang`
    (containers run forever and write nothing after their start-up lines: a stuck NCCL collective)."""

    action: Literal["fail", "never_schedule", "hang"]
    selector: PodSelector = PodSelector()
    fraction: float = Field(1.0, ge=0.0, le=1.0)
    exit_code: int = Field(1, ge=1, le=255)
    after_ms: float = Field(0.0, ge=0.0)
    message: str = "failure injected by the simulator profile"


class NodeFault(_Model):
    """`count` nodes of `pool` (every pool when None) turn NotReady `after_ms` after the simulator started."""

    pool: str | None = None
    count: int = Field(1, ge=1)
    after_ms: float = Field(0.0, ge=0.0)


FaultKind = Literal["gpu_xid", "gpu_lost", "ecc", "node_lost", "evicted", "preempted", "image_pull", "oom",
                    "volume_attach"]


class FaultEvent(_Model):
    """One fault a real GPU cluster has, at a chosen time on a chosen object (sim/controllers/faults.py): `after_s`
    seconds after the simulator started, or after the `nth` pod matching `when_running` started running; it hits one
    running pod matching `pod` (default: the pod that started, else any; several: chosen by the seed), the node `node`
    (or one of `pool`, by the seed) and GPU `gpu` (default: the hit pod's first GPU, else one chosen by the seed)."""

    kind: FaultKind
    after_s: float = Field(0.0, ge=0.0)
    when_running: PodSelector | None = None
    nth: int = Field(1, ge=1)
    pod: PodSelector | None = None
    node: str | None = None
    pool: str | None = None
    gpu: int | None = Field(None, ge=0, le=63)
    xid: int = Field(79, ge=1, le=1000)  # gpu_xid: the Xid code
    uncorrectable: bool = True  # ecc: a double-bit (Xid 48) or a single-bit error
    errors: int = Field(1, ge=1)  # ecc: how many
    toleration_s: float | None = Field(None, ge=0.0)  # node_lost: eviction delay instead of the pods' own
    resource: Literal["memory", "ephemeral-storage", "pid"] = "memory"  # evicted: the node pressure
    claim: str | None = None  # volume_attach: the PVC whose attach fails (default: every PVC of the pods)
    attach_delay_s: float | None = Field(None, ge=0.0)  # volume_attach: attached after this long; None: never


class Faults(_Model):
    api: list[ApiFault] = Field(default_factory=list)
    pods: list[PodFault] = Field(default_factory=list)
    nodes: list[NodeFault] = Field(default_factory=list)
    events: list[FaultEvent] = Field(default_factory=list)


def _default_pools() -> list[NodePool]:
    return [NodePool(name="gpu", count=2, gpu_profile="a100")]


class Profile(_Model):
    seed: int = 0
    node_pools: list[NodePool] = Field(default_factory=_default_pools)
    stages: PodStages = PodStages()
    nodes: NodeTimings = NodeTimings()
    jobs: SyncTimings = SyncTimings()
    deployments: SyncTimings = SyncTimings()
    volumes: VolumeTimings = VolumeTimings()
    faults: Faults = Faults()
    # extra controllers, "module:Class" or "path/to/file.py:Class", started after the built-in ones
    controllers: list[str] = Field(default_factory=list)
    # settings of controller plugins, by controller name, each validated by its plugin (`Controller.settings_model`)
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # real workloads: a container whose image matches an entry runs as a local process (sim/node/realworkload.py)
    runtime: list[RuntimeEntry] = Field(default_factory=list)
    # what the cluster has before anything is installed: [] is a fresh cluster (no GPU advertised, no Kubeflow,
    # KServe or Kueue kind served); names of PREINSTALLABLE, or "all"
    preinstalled: list[str] = Field(default_factory=list)

    @field_validator("preinstalled", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        """`all` or `kserve,kueue` (a --var, the command line) as a list."""
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @field_validator("preinstalled")
    @classmethod
    def _known_preinstalled(cls, value: list[str]) -> list[str]:
        known = ("all", *PREINSTALLABLE)
        unknown = [name for name in value if name not in known]
        if unknown:
            raise ValueError(f"unknown {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
        return value

    def preinstalls(self, name: str) -> bool:
        """Whether `name` (one of PREINSTALLABLE) is there from the start."""
        return name in self.preinstalled or "all" in self.preinstalled

    @field_validator("controllers")
    @classmethod
    def _controller_specs(cls, value: list[str]) -> list[str]:
        for spec in value:
            module, _, name = spec.partition(":")
            if not module or not name.isidentifier():
                raise ValueError(f"{spec!r}: a controller is named 'module:Class' or 'path/to/file.py:Class'")
        return value

    @model_validator(mode="after")
    def _unique_pool_names(self) -> Profile:
        names = [p.name for p in self.node_pools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"node pool names must be unique; repeated: {', '.join(duplicates)}")
        known = set(names)
        for fault in self.faults.nodes:
            if fault.pool is not None and fault.pool not in known:
                raise ValueError(f"faults.nodes names pool {fault.pool!r}, not one of: {', '.join(names)}")
        for event in self.faults.events:
            if event.pool is not None and event.pool not in known:
                raise ValueError(f"faults.events names pool {event.pool!r}, not one of: {', '.join(names)}")
            if event.node is not None and not self._has_node(event.node):
                raise ValueError(f"faults.events names node {event.node!r}, not a node of the pools (<pool>-0000)")
        return self

    def _has_node(self, name: str) -> bool:
        """Whether a pool makes a node of that name (`<pool>-0000`, 6 digits from 10,000 nodes)."""
        pool_name, _, index = name.rpartition("-")
        pool = next((p for p in self.node_pools if p.name == pool_name), None)
        if pool is None or not index.isdigit():
            return False
        return len(index) == (4 if pool.count < 10_000 else 6) and int(index) < pool.count

    @property
    def total_nodes(self) -> int:
        return sum(p.count for p in self.node_pools)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, source: str = "profile") -> Profile:
        """Build a profile from a mapping (a YAML document, a suite's `cluster.sim` section).

        The top-level shortcut keys `nodes` (an integer), `gpu_profile` and `gpus_per_node` act like the command-line
        flags on the first node pool.
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise TopsailError(f"{source}: a simulator profile must be a mapping, got {type(data).__name__}")
        data = dict(data)
        shortcuts = {}
        for key in SHORTCUT_KEYS:
            if key in data and not isinstance(data[key], dict):
                shortcuts[key] = data.pop(key)
        try:
            profile = cls.model_validate(data)
        except ValidationError as exc:
            raise TopsailError(describe_validation_error(exc, source, "invalid simulator profile", cls)) from None
        return profile.with_overrides(source=source, **shortcuts)

    def with_overrides(
        self,
        *,
        nodes: int | None = None,
        gpu_profile: str | None = None,
        gpus_per_node: int | None = None,
        seed: int | None = None,
        preinstalled: str | None = None,
        source: str = "command line",
    ) -> Profile:
        """A copy with the shortcuts applied to the first node pool (a default pool if there is none), and
        `preinstalled` ("all" or a comma list, replacing the profile's) when given."""
        if nodes is None and gpu_profile is None and gpus_per_node is None and seed is None and preinstalled is None:
            return self
        data = self.model_dump(mode="json")
        pools = data["node_pools"] or [NodePool(name="gpu", count=0).model_dump(mode="json")]
        first = pools[0]
        if nodes is not None:
            first["count"] = nodes
        if gpu_profile is not None:
            first["gpu_profile"] = gpu_profile
            if gpus_per_node is None:
                first["gpus_per_node"] = None  # the new GPU profile's default
        if gpus_per_node is not None:
            first["gpus_per_node"] = gpus_per_node
        data["node_pools"] = pools
        if seed is not None:
            data["seed"] = seed
        if preinstalled is not None:
            data["preinstalled"] = preinstalled
        given = {"nodes": nodes, "gpu_profile": gpu_profile, "gpus_per_node": gpus_per_node}
        internal = {"nodes": "count", "gpu_profile": "gpu_profile", "gpus_per_node": "gpus_per_node"}
        typed = {f"node_pools[0].{internal[name]}": name for name, value in given.items() if value is not None}
        if preinstalled is not None:
            typed["preinstalled"] = "preinstalled"
        try:
            return type(self).model_validate(data)
        except ValidationError as exc:
            raise TopsailError(describe_validation_error(exc, source, "invalid simulator profile", typed=typed)) \
                from None

    def to_dict(self) -> dict[str, Any]:
        """A plain mapping that `from_dict` reads back (for writing the profile of a run to a file)."""
        return self.model_dump(mode="json")
