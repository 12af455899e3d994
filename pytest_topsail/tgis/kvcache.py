"""The simulated vLLM scheduler: KV-cache blocks, admission, preemption, prefix caching and LoRA slots, as pure
logic (no I/O, no clock): serving.py drives it from each request's coroutine, tests drive it call by call.

- Capacity (``kv_cache_blocks``) as vLLM sizes it at start-up: one device's memory x gpu_memory_utilization, minus
  the weights and the activation reserve of the profiling pass, over the bytes of one block of ``block_size`` tokens
  (K and V of every layer); ``num_gpu_blocks_override`` forces it. Sharded: each shard holds its part of every block.
- Admission (``schedule``): waiting requests in order (FCFS) join the running batch while fewer than ``max_num_seqs``
  run and the blocks of their tokens are free; the head of the queue that cannot get its blocks stops admission.
- Growth (``append_token``): a running request takes one block each ``block_size`` tokens; when none is free the
  newest running request is preempted (recompute): its blocks are freed, it goes to the front of the waiting queue
  and, readmitted, computes its prompt and generated tokens again.
- Prefix caching (``enable_prefix_caching``): each full block of a prompt has a hash chained on the previous one's
  (and the adapter's name); a request's longest chain of cached blocks is reused (its prefill skips those tokens, at
  most all tokens but the last one's block). Freed blocks keep their hash in an LRU free queue, tail blocks first,
  until a new allocation takes them.
- LoRA: a request naming an adapter needs it in one of ``max_loras`` slots: a resident one is used, else a free slot
  or the least recently used idle adapter's is loaded (``lora_loads`` counted, the request pays the load time); a
  request whose adapter cannot be placed waits while those behind it pass.
Per token the bookkeeping is O(1); hashing a prompt is O(prompt tokens), only with prefix caching on.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_topsail.tgis.catalog import ServedModel
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.sizing import device_memory_gib, weights_gb

DEFAULT_BLOCK_SIZE = 16
# vLLM profiles the activations of one forward pass at max_num_batched_tokens; its documented example (Llama-3-8B,
# 8.03B parameters, A100-40GB) reserves 9.37 GiB: per billion parameters
ACTIVATION_GIB_PER_BILLION = 9.37 / 8.03
# a dense decoder's hidden size h and layer count L: parameters ~ 12 L h^2 with h / L ~ 128 (Llama-2-7B: 4096 / 32)
HIDDEN_PER_LAYER = 128
NOTHING: tuple[()] = ()


def kv_bytes_per_token(model: ServedModel, config: ModelConfig) -> float:
    """Bytes of K and V of one token over all layers: 2 x layers x hidden x dtype bytes (no grouped-query
    attention), layers and hidden estimated from the parameter count."""
    hidden = (model.params_billions * 1e9 * HIDDEN_PER_LAYER / 12) ** (1 / 3)
    layers = hidden / HIDDEN_PER_LAYER
    dtype_bytes = 4.0 if config.dtype_str == "float32" else 2.0
    return 2 * layers * hidden * dtype_bytes


def kv_cache_blocks(config: ModelConfig, gpu_profile: str, model_name: str, model: ServedModel) -> int:
    """The number of KV-cache blocks vLLM would allocate; ``num_gpu_blocks_override`` when given. Never fewer than
    a full batch of max-length sequences holds: the weights and activations are estimates, and a model the sizing
    (sizing.check_fit) lets a GPU serve is not refused or slowed by them."""
    if config.num_gpu_blocks_override:
        return config.num_gpu_blocks_override
    device_gib, _what = device_memory_gib(config, gpu_profile)
    shards = config.num_shard
    weights_gib = weights_gb(config, model_name, model) * 1e9 / 2**30 / shards
    activation_gib = ACTIVATION_GIB_PER_BILLION * model.params_billions / shards
    free_bytes = (device_gib * config.gpu_memory_utilization - weights_gib - activation_gib) * 2**30
    block_bytes = (config.block_size or DEFAULT_BLOCK_SIZE) * kv_bytes_per_token(model, config) / shards
    full_batch = config.max_batch_size * math.ceil(config.max_sequence_length / (config.block_size
                                                                                 or DEFAULT_BLOCK_SIZE))
    return max(int(free_bytes // block_bytes), full_batch)


@dataclass(frozen=True)
class CacheConfig:
    num_blocks: int
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_seqs: int = 8
    enable_prefix_caching: bool = False
    max_loras: int = 1
    lora_load_s: float = 0.0

    @classmethod
    def for_model(cls, config: ModelConfig, gpu_profile: str, model_name: str, model: ServedModel) -> CacheConfig:
        return cls(num_blocks=kv_cache_blocks(config, gpu_profile, model_name, model),
                   block_size=config.block_size or DEFAULT_BLOCK_SIZE, max_num_seqs=config.max_batch_size,
                   enable_prefix_caching=bool(config.enable_prefix_caching), max_loras=config.max_loras or 1,
                   lora_load_s=(config.lora_load_ms or 0.0) / 1000)


@dataclass(eq=False)
class RequestState:
    """One request in the scheduler. ``tokens``: prompt plus generated so far (what its blocks hold);
    ``to_compute``: tokens its next (re)admission must prefill (the cached prefix taken off); ``load_lora``: its
    admission loaded its adapter; ``waker``: free for the I/O layer (what wakes its coroutine on admission)."""

    number: int
    prompt_tokens: int
    hashes: tuple[int, ...] = ()
    adapter: str | None = None
    tokens: int = 0
    blocks: list[int] = field(default_factory=list)
    capacity: int = 0  # tokens its blocks hold
    running: bool = False
    finished: bool = False
    recompute: bool = False  # preempted since its coroutine last looked
    to_compute: int = 0
    cached_tokens: int = 0
    load_lora: bool = False
    preemptions: int = 0
    waker: Any = None


def prompt_hashes(tokens: Sequence[str], block_size: int, adapter: str | None = None) -> tuple[int, ...]:
    """The chained hash of each full block of ``tokens`` (vLLM's block hash: parent hash, the block's tokens, the
    adapter)."""
    hashes: list[int] = []
    parent = hash(adapter)
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start:start + block_size])))
        hashes.append(parent)
    return tuple(hashes)


class BlockPool:
    """``num_blocks`` blocks: never used ones (a count), freed ones in LRU order (keeping their hash until taken)."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.created = 0  # blocks 0..created-1 have been handed out at least once
        self.free: OrderedDict[int, None] = OrderedDict()  # freed blocks, least recently freed first
        self.refs: list[int] = []
        self.hash_of: dict[int, int] = {}
        self.by_hash: dict[int, int] = {}

    @property
    def available(self) -> int:
        return self.num_blocks - self.created + len(self.free)

    @property
    def used(self) -> int:
        return self.num_blocks - self.available

    def allocate(self) -> int:
        if self.created < self.num_blocks:
            self.created += 1
            self.refs.append(1)
            return self.created - 1
        block, _ = self.free.popitem(last=False)
        evicted = self.hash_of.pop(block, None)
        if evicted is not None:
            del self.by_hash[evicted]
        self.refs[block] = 1
        return block

    def cached(self, hashes: Sequence[int]) -> list[int]:
        """The blocks of the longest cached chain of ``hashes`` (not taken)."""
        blocks = []
        for value in hashes:
            block = self.by_hash.get(value)
            if block is None:
                break
            blocks.append(block)
        return blocks

    def take(self, block: int) -> None:
        if self.refs[block] == 0:
            del self.free[block]
        self.refs[block] += 1

    def release(self, blocks: Sequence[int]) -> None:
        """Drop a reference to each block, tail first (a freed tail is evicted before the prefix it extends)."""
        for block in reversed(blocks):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.free[block] = None

    def commit(self, block: int, value: int) -> None:
        """The block now holds the computed tokens whose chain hash is ``value``."""
        if value not in self.by_hash and block not in self.hash_of:
            self.by_hash[value] = block
            self.hash_of[block] = value


@dataclass
class SchedulerCounters:
    """What vLLM counts (metric names in vllm_metrics.py): tokens in the prefix-cache counters."""

    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    lora_loads: int = 0
    lora_requests: Counter[str] = field(default_factory=Counter)


class Scheduler:
    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self.pool = BlockPool(config.num_blocks)
        self.waiting: deque[RequestState] = deque()
        self.running: dict[RequestState, None] = {}  # in admission order: the last is the newest
        self.counters = SchedulerCounters()
        self.resident: OrderedDict[str, None] = OrderedDict()  # adapters in GPU slots, least recently used first
        self.adapter_running: Counter[str] = Counter()
        self._numbers = 0

    # -- requests ------------------------------------------------------------------------------------------------
    def add(self, prompt_tokens: int, hashes: tuple[int, ...] = (), adapter: str | None = None) -> RequestState:
        """A new request at the back of the waiting queue (``schedule`` admits it)."""
        self._numbers += 1
        sequence = RequestState(self._numbers, prompt_tokens, hashes, adapter, tokens=prompt_tokens)
        self.waiting.append(sequence)
        if adapter:
            self.counters.lora_requests[adapter] += 1
        return sequence

    def schedule(self) -> list[RequestState]:
        """Admit waiting requests in order while they fit; the admitted ones."""
        admitted: list[RequestState] = []
        skipped: list[RequestState] = []
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            sequence = self.waiting[0]
            if sequence.adapter and not self._can_place(sequence.adapter):
                skipped.append(self.waiting.popleft())  # its adapter has no slot: those behind it pass
                continue
            if not self._allocate_prompt(sequence):
                break
            self.waiting.popleft()
            self._place(sequence)
            self.running[sequence] = None
            sequence.running = True
            admitted.append(sequence)
        self.waiting.extendleft(reversed(skipped))
        return admitted

    def prefilled(self, sequence: RequestState) -> None:
        """The request's prompt is computed: its full prompt blocks become reusable by their hashes."""
        for block, value in zip(sequence.blocks, sequence.hashes, strict=False):
            self.pool.commit(block, value)

    def append_token(self, sequence: RequestState) -> Sequence[RequestState]:
        """One more token of a running request; the requests preempted to find it a block (maybe itself)."""
        sequence.tokens += 1
        if sequence.tokens <= sequence.capacity:
            return NOTHING
        preempted: list[RequestState] = []
        while not self.pool.available:
            victim = next(reversed(self.running))
            self._preempt(victim)
            preempted.append(victim)
            if victim is sequence:
                return preempted
        sequence.blocks.append(self.pool.allocate())
        sequence.capacity += self.config.block_size
        return preempted

    def finish(self, sequence: RequestState) -> None:
        """The request ended (completed, aborted or cancelled), running or waiting."""
        if sequence.finished:
            return
        sequence.finished = True
        if sequence.running:
            self._free(sequence)
        else:
            try:
                self.waiting.remove(sequence)
            except ValueError:
                pass

    # -- state ---------------------------------------------------------------------------------------------------
    @property
    def usage(self) -> float:
        """The share of the blocks in use (vLLM's kv_cache_usage_perc, 0..1)."""
        return self.pool.used / self.pool.num_blocks

    def capacity_tokens(self) -> int:
        return self.pool.num_blocks * self.config.block_size

    # -- internals -----------------------------------------------------------------------------------------------
    def _allocate_prompt(self, sequence: RequestState) -> bool:
        """Blocks for all the request's tokens, the cached prefix reused; False (nothing taken) when they do not fit."""
        size = self.config.block_size
        needed = math.ceil(sequence.tokens / size)
        hits: list[int] = []
        if self.config.enable_prefix_caching and sequence.hashes:
            hits = self.pool.cached(sequence.hashes[:(sequence.tokens - 1) // size])
        hits_in_free = sum(1 for block in hits if self.pool.refs[block] == 0)
        if self.pool.available - hits_in_free < needed - len(hits):
            return False
        for block in hits:
            self.pool.take(block)
        sequence.blocks = hits + [self.pool.allocate() for _ in range(needed - len(hits))]
        sequence.capacity = needed * size
        sequence.cached_tokens = len(hits) * size
        sequence.to_compute = sequence.tokens - sequence.cached_tokens
        if self.config.enable_prefix_caching:
            self.counters.prefix_queries += sequence.tokens
            self.counters.prefix_hits += sequence.cached_tokens
        return True

    def _can_place(self, adapter: str) -> bool:
        if adapter in self.resident or len(self.resident) < self.config.max_loras:
            return True
        return any(not self.adapter_running[name] for name in self.resident)

    def _place(self, sequence: RequestState) -> None:
        adapter = sequence.adapter
        sequence.load_lora = False
        if not adapter:
            return
        if adapter in self.resident:
            self.resident.move_to_end(adapter)
        else:
            if len(self.resident) >= self.config.max_loras:
                idle = next(name for name in self.resident if not self.adapter_running[name])
                del self.resident[idle]
            self.resident[adapter] = None
            self.counters.lora_loads += 1
            sequence.load_lora = True
        self.adapter_running[adapter] += 1

    def _free(self, sequence: RequestState) -> None:
        self.pool.release(sequence.blocks)
        sequence.blocks = []
        sequence.capacity = 0
        del self.running[sequence]
        sequence.running = False
        if sequence.adapter:
            self.adapter_running[sequence.adapter] -= 1

    def _preempt(self, sequence: RequestState) -> None:
        self._free(sequence)
        sequence.recompute = True
        sequence.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(sequence)
