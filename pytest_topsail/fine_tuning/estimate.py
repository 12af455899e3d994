"""The physics of one fine-tuning point: memory needed per GPU and FLOPs per token (general knowledge of transformer
training, see docs/fine-tuning.md "Memory estimate"). Used by the suite's pre-flight (:func:`memory_estimate` of a
point's settings) and by the simulator (a :class:`Point` of the trainer's configuration).

Memory per GPU = model states + activations + reserve:
- model states: full fine-tuning keeps weights, gradients and Adam states (16 bytes/parameter with 16-bit mixed
  precision: 2 weights + 2 gradients + 12 fp32 master copy and moments; 16 in fp32 too: 4 + 4 + 8), sharded over
  the GPUs by FSDP when there are several; LoRA keeps frozen 16-bit weights (2 bytes/parameter, also sharded) plus
  the adapters' full states; QLoRA keeps 4-bit weights (~0.55 bytes/parameter with scales).
- activations per layer ~ s*b*h*(34 + 5*a*s/h) bytes for 16-bit (x2 in fp32); FlashAttention removes the s^2 term;
  gradient checkpointing keeps ~2*s*b*h per layer plus one layer's full activations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_topsail.fine_tuning.catalog import Catalog, ModelSpec
from pytest_topsail.fine_tuning.point import PointSettings

GIB = 2**30


@dataclass(frozen=True)
class MemoryCoefficients:
    full_bytes_per_param: float = 16.0
    frozen_bytes_per_param: float = 2.0  # LoRA's frozen 16-bit weights
    quantized_bytes_per_param: float = 0.55  # QLoRA's 4-bit weights with scales
    adapter_state_bytes_per_param: float = 16.0
    activation_factor: float = 34.0  # bytes per s*b*h and layer, 16-bit, without the attention scores
    attention_factor: float = 5.0  # x a*s/h: the attention scores FlashAttention does not keep
    checkpoint_factor: float = 2.0  # bytes per s*b*h and layer kept by gradient checkpointing


@dataclass(frozen=True)
class Point:
    """What the physics needs to know about a point (built from PointSettings or a trainer configuration)."""

    model: ModelSpec
    method: str  # full | lora | qlora
    world_size: int
    batch: int  # per device
    seq: int  # tokens per sample as the trainer pads them (at most max_seq_length)
    dtype: str = "bfloat16"
    flash_attention: bool = False
    gradient_checkpointing: bool = False
    lora_r: int = 4
    lora_modules: int = 2

    @property
    def params(self) -> float:
        return self.model.params


@dataclass(frozen=True)
class MemoryEstimate:
    model_states_gib: float
    activations_gib: float
    reserve_gib: float

    @property
    def total_gib(self) -> float:
        return self.model_states_gib + self.activations_gib + self.reserve_gib

    def describe(self) -> str:
        return (f"{self.total_gib:.1f} GiB per GPU (model states {self.model_states_gib:.1f} + activations "
                f"{self.activations_gib:.1f} + reserve {self.reserve_gib:.1f})")


def memory_estimate(point: PointSettings, catalog: Catalog, reserve_gib: float, where: str) -> MemoryEstimate:
    """The memory `point` needs per GPU: the catalog's model (its parameter count replaced by the point's
    ``model_params_b`` when given) trained in the point's shape, plus `reserve_gib`; `where` names the point in
    the error about a model the catalog does not know."""
    return memory_per_gpu(point_shape(point, catalog, where), reserve_gib)


def point_shape(point: PointSettings, catalog: Catalog, where: str) -> Point:
    """What the physics needs of a point's settings: the catalog's model (its parameter count replaced by the point's
    ``model_params_b`` when given) trained in the point's shape; `where` names the point in the error about a model
    the catalog does not know."""
    spec = catalog.model(point.model, where)
    if point.model_params_b is not None:
        spec = spec.model_copy(update={"params_b": point.model_params_b})
    return Point(spec, point.method, point.world_size, batch=point.per_device_batch_size,
                 seq=min(point.max_seq_length, spec.max_length), dtype=point.dtype,
                 flash_attention=point.flash_attention, gradient_checkpointing=point.gradient_checkpointing,
                 lora_r=point.lora.r, lora_modules=module_count(point.lora.target_modules or []))


def module_count(target_modules: list[str] | tuple[str, ...]) -> int:
    """Adapted matrices per layer: `all-linear` is the 7 linear layers of a Llama-style block."""
    return 7 if "all-linear" in target_modules else max(1, len(target_modules))


def adapter_params(point: Point) -> float:
    """LoRA adapter parameters: two r x hidden matrices per targeted module and layer."""
    if point.method == "full":
        return 0.0
    return 2.0 * point.lora_r * point.model.hidden * point.lora_modules * point.model.layers


def memory_per_gpu(point: Point, reserve_gib: float = 2.0,
                   coefficients: MemoryCoefficients = MemoryCoefficients()) -> MemoryEstimate:
    c = coefficients
    world = max(1, point.world_size)
    if point.method == "full":
        states = point.params * c.full_bytes_per_param / world
    else:
        weight_bytes = c.quantized_bytes_per_param if point.method == "qlora" else c.frozen_bytes_per_param
        if point.dtype == "float32" and point.method == "lora":
            weight_bytes *= 2
        states = point.params * weight_bytes / world + adapter_params(point) * c.adapter_state_bytes_per_param
    return MemoryEstimate(states / GIB, activation_bytes(point, c) / GIB, reserve_gib)


def activation_bytes(point: Point, c: MemoryCoefficients = MemoryCoefficients()) -> float:
    model = point.model
    sbh = float(point.seq) * point.batch * model.hidden
    scores = 0.0 if point.flash_attention else c.attention_factor * model.heads * point.seq / model.hidden
    full_layer = sbh * (c.activation_factor + scores)
    if point.dtype == "float32":
        full_layer *= 2
    if point.gradient_checkpointing:
        return sbh * c.checkpoint_factor * model.layers + full_layer
    return full_layer * model.layers


def flops_per_token(point: Point, lora_factor: float = 4.0, full_factor: float = 6.0) -> float:
    """Training FLOPs per token: ~6N for full fine-tuning (forward 2N, backward 4N), ~4N for LoRA (no weight
    gradients of the frozen matrices), plus the attention (12*L*h*s); gradient checkpointing recomputes the forward
    (x 8/6)."""
    factor = full_factor if point.method == "full" else lora_factor
    flops = factor * point.params + 12.0 * point.model.layers * point.model.hidden * point.seq
    if point.gradient_checkpointing:
        flops *= 8.0 / 6.0
    return flops


def model_flops_per_token(point: Point) -> float:
    """The model FLOPs of one trained token, as MFU counts them: :func:`flops_per_token` without the forward that
    gradient checkpointing recomputes (the hardware does that work, the model does not need it)."""
    return flops_per_token(replace(point, gradient_checkpointing=False))
