"""The simulated vLLM scheduler (tgis/kvcache.py), call by call: capacity, admission, preemption, prefix caching,
LoRA slots."""

from __future__ import annotations

from pytest_topsail.tgis.kvcache import CacheConfig, Scheduler, kv_cache_blocks, prompt_hashes
from pytest_topsail.tgis.model_config import ModelConfig
from pytest_topsail.tgis.sizing import served_model


def scheduler(blocks: int, **options: object) -> Scheduler:
    return Scheduler(CacheConfig(num_blocks=blocks, block_size=4, **options))  # type: ignore[arg-type]


def test_capacity_follows_memory_weights_and_override() -> None:
    bloom = served_model("bigscience/bloom-560m")
    llama = served_model("meta-llama/Llama-2-7b-hf")
    assert bloom is not None and llama is not None
    config = ModelConfig()
    small, large = (kv_cache_blocks(config, "a100", name, model)
                    for name, model in (("meta-llama/Llama-2-7b-hf", llama), ("bigscience/bloom-560m", bloom)))
    assert 0 < small < large  # bigger weights and bigger blocks: fewer blocks (both above the full-batch floor)
    tighter = kv_cache_blocks(ModelConfig(gpu_memory_utilization=0.5), "a100", "bigscience/bloom-560m", bloom)
    assert tighter < large
    assert kv_cache_blocks(ModelConfig(num_gpu_blocks_override=7), "a100", "bigscience/bloom-560m", bloom) == 7


def test_admission_while_blocks_and_seats_are_free() -> None:
    sched = scheduler(4, max_num_seqs=3)
    first, second, third = (sched.add(6) for _ in range(3))  # 2 blocks each
    assert sched.schedule() == [first, second]
    assert list(sched.waiting) == [third] and sched.usage == 1.0
    sched.finish(first)
    assert sched.schedule() == [third] and sched.usage == 1.0


def test_a_request_without_a_block_preempts_the_newest() -> None:
    sched = scheduler(4, max_num_seqs=4)
    old, new = sched.add(8), sched.add(7)  # 2 blocks each, all 4 taken; `new` has one free slot in its block
    sched.schedule()
    assert not sched.append_token(new)  # token 8 fits its block
    assert sched.append_token(old) == [new]  # token 9 needs a block: the newest gives its blocks
    assert new.recompute and not new.running and list(sched.waiting) == [new]
    assert sched.counters.preemptions == 1 and len(old.blocks) == 3
    sched.finish(old)
    assert sched.schedule() == [new] and new.to_compute == 8  # its prompt and generated token again


def test_the_newest_preempts_itself_when_it_is_the_newest() -> None:
    sched = scheduler(2, max_num_seqs=4)
    old, new = sched.add(4), sched.add(4)
    sched.schedule()
    assert sched.append_token(new) == [new]
    assert sched.running == {old: None}


def test_prefix_cache_reuses_full_blocks_of_the_same_chain() -> None:
    sched = scheduler(16, max_num_seqs=4, enable_prefix_caching=True)
    shared = ["sys"] * 8
    first = sched.add(10, prompt_hashes([*shared, "a", "b"], 4))
    sched.schedule()
    sched.prefilled(first)
    second = sched.add(10, prompt_hashes([*shared, "c", "d"], 4))
    other = sched.add(10, prompt_hashes(["x", *shared, "c"], 4))
    sched.schedule()
    assert (second.cached_tokens, second.to_compute) == (8, 2)
    assert other.cached_tokens == 0
    assert sched.counters.prefix_queries == 30 and sched.counters.prefix_hits == 8
    assert second.blocks[:2] == first.blocks[:2]


def test_a_freed_prefix_stays_cached_until_its_block_is_taken() -> None:
    sched = scheduler(3, max_num_seqs=4, enable_prefix_caching=True)
    tokens = ["p"] * 8 + ["q"]
    first = sched.add(9, prompt_hashes(tokens, 4))
    sched.schedule()
    sched.prefilled(first)
    sched.finish(first)
    again = sched.add(9, prompt_hashes(tokens, 4))
    sched.schedule()
    assert again.cached_tokens == 8
    sched.finish(again)
    filler = sched.add(12)  # takes all three blocks: the cached prefix is evicted
    sched.schedule()
    sched.finish(filler)
    last = sched.add(9, prompt_hashes(tokens, 4))
    sched.schedule()
    assert last.cached_tokens == 0


def test_a_whole_cached_prompt_still_computes_its_last_block() -> None:
    sched = scheduler(8, max_num_seqs=4, enable_prefix_caching=True)
    tokens = ["t"] * 8
    first = sched.add(8, prompt_hashes(tokens, 4))
    sched.schedule()
    sched.prefilled(first)
    same = sched.add(8, prompt_hashes(tokens, 4))
    sched.schedule()
    assert same.cached_tokens == 4 and same.to_compute == 4


def test_lora_slots_load_and_swap_idle_adapters() -> None:
    sched = scheduler(64, max_num_seqs=8, max_loras=2)
    a, b = sched.add(4, adapter="a"), sched.add(4, adapter="b")
    c, base = sched.add(4, adapter="c"), sched.add(4)
    assert sched.schedule() == [a, b, base]  # c waits for a slot, the base model passes
    assert a.load_lora and b.load_lora and sched.counters.lora_loads == 2
    sched.finish(a)
    assert sched.schedule() == [c] and c.load_lora and sched.counters.lora_loads == 3
    again = sched.add(4, adapter="b")
    assert sched.schedule() == [again] and not again.load_lora
    assert sched.counters.lora_requests == {"a": 1, "b": 2, "c": 1}


def test_a_request_cancelled_while_waiting_leaves_the_queue() -> None:
    sched = scheduler(1, max_num_seqs=4)
    running, waiting = sched.add(4), sched.add(4)
    sched.schedule()
    sched.finish(waiting)
    assert not sched.waiting
    sched.finish(running)
    assert sched.usage == 0.0
