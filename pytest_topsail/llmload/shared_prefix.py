"""Prompts that share prefixes, and requests spread over several models (LoRA adapters), as vLLM's
``prefix_repetition`` dataset and guidellm's ``prefix_buckets`` generate them.

``shared_prefix_prompts``: ``prefixes`` random prefixes of ``prefix_tokens`` tokens, each followed by
``prompts_per_prefix`` random suffixes of ``suffix_tokens`` tokens (toy tokens of the reference server: one word
each), shuffled (seeded) so that consecutive requests do not follow one prefix. Every prompt is distinct, so a
server's prefix cache can reuse the prefixes only: the shared share of the prompt tokens is
``prefix_tokens / (prefix_tokens + suffix_tokens)`` (``shared_share``), less the first use of each prefix.
``assign_models``: each prompt names one model drawn by weight (seeded).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_topsail.llmload.dataset import SHORT_WORDS, Prompt


def random_words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(SHORT_WORDS) for _ in range(count))


def shared_prefix_prompts(prefixes: int, prompts_per_prefix: int, prefix_tokens: int, suffix_tokens: int,
                          output_tokens: int, seed: int = 0) -> list[Prompt]:
    rng = random.Random(f"shared-prefix/{seed}/{prefix_tokens}/{suffix_tokens}")
    prompts = []
    for _ in range(prefixes):
        prefix = random_words(rng, prefix_tokens)
        for _ in range(prompts_per_prefix):
            text = " ".join(part for part in (prefix, random_words(rng, suffix_tokens)) if part)
            prompts.append(Prompt(text=text, input_tokens=prefix_tokens + suffix_tokens, output_tokens=output_tokens))
    rng.shuffle(prompts)
    return prompts


def shared_share(prefix_tokens: int, suffix_tokens: int) -> float:
    """The share of each prompt's tokens its prefix makes."""
    return prefix_tokens / (prefix_tokens + suffix_tokens)


def assign_models(prompts: Sequence[Prompt], weights: Mapping[str, float], seed: int = 0) -> list[Prompt]:
    """Each prompt naming one of ``weights``' models, drawn in proportion to its weight (seeded)."""
    rng = random.Random(f"models/{seed}")
    names, shares = list(weights), list(weights.values())
    return [replace(prompt, model=rng.choices(names, shares)[0]) for prompt in prompts]
