"""Prompts of a load test: text plus the input and output token lengths the request asks for.

Accepted JSON-lines formats (one object per line; blank lines skipped):
- ours: ``{"prompt": str, "input_tokens": int, "output_tokens": int, "system_prompt"?: str, "model"?: str}``
- llm-load-test's: ``{"question": str, "tok_input_length": int, "tok_output_length" | "output_tokens": int,
  "system_prompt"?: str}``, its first line being a metadata object (``name``/``dataset_info``, no prompt), skipped.
Synthetic prompts (``synthetic_prompts``): token lengths drawn from a clipped normal distribution (seeded), the text
exactly that many tokens long for our toy tokenizer (the reference server's), or for a tokenizer file
(``tokenizer.json`` of the Hugging Face ``tokenizers`` library) when one is given. ``filter_prompts``: llm-load-test's
input/output length filters. Shared-prefix prompts and per-request models: shared_prefix.py; conversations
(a prompt's ``history`` and ``turn``): multi_turn.py.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.jsonl import read_json_lines

BUNDLED = Path(__file__).parent / "data" / "synthetic.jsonl"
WORDS = ("the model serves tokens fast while the batch grows and the queue waits for a free slot in the "
         "scheduler of the inference server under load").split()


@dataclass(frozen=True)
class Prompt:
    text: str
    input_tokens: int
    output_tokens: int
    system_prompt: str = ""
    model: str | None = None  # the model (or LoRA adapter) this request names; None: the case's model
    history: tuple[str, ...] = ()  # a conversation's earlier turns: user, assistant, user, ... (multi_turn.py)
    turn: int | None = None  # the turn of its conversation (1: the first), None: no conversation

    def full_text(self) -> str:
        """The text of a completion request: the system prompt, the earlier turns, the prompt, one a line."""
        return "\n".join(part for part in (self.system_prompt, *self.history, self.text) if part)

    def messages(self) -> list[dict[str, str]]:
        """The messages of a chat request: the system prompt, the earlier turns (user and assistant in turn), the
        prompt."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        earlier = [{"role": ("user", "assistant")[number % 2], "content": text}
                   for number, text in enumerate(self.history)]
        return [*system, *earlier, {"role": "user", "content": self.text}]


def load_dataset(path: Path | str, *, limit: int | None = None) -> list[Prompt]:
    """Read a dataset file; any bad line is a TopsailError naming the file and line."""
    path = Path(path)
    prompts: list[Prompt] = []
    for number, entry in read_json_lines(path, "dataset"):
        if number == 1 and is_metadata(entry):
            continue
        prompts.append(parse_entry(entry, f"dataset {path}:{number}"))
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise TopsailError(f"dataset {path}: holds no prompt")
    return prompts


def is_metadata(entry: Any) -> bool:
    return isinstance(entry, dict) and not ({"prompt", "question"} & entry.keys())


def parse_entry(entry: Any, where: str) -> Prompt:
    if not isinstance(entry, dict):
        raise TopsailError(f"{where}: expected an object, got {type(entry).__name__}")
    text = entry.get("prompt", entry.get("question"))
    if not isinstance(text, str):
        raise TopsailError(f"{where}: needs a string 'prompt' (or llm-load-test's 'question')")
    input_tokens = first_int(entry, ("input_tokens", "tok_input_length"), where)
    output_tokens = first_int(entry, ("output_tokens", "tok_output_length"), where)
    if output_tokens < 1:
        raise TopsailError(f"{where}: output_tokens must be >= 1, got {output_tokens}")
    system_prompt = entry.get("system_prompt") or ""
    if not isinstance(system_prompt, str):
        raise TopsailError(f"{where}: system_prompt must be a string")
    model = entry.get("model")
    if model is not None and not isinstance(model, str):
        raise TopsailError(f"{where}: model must be a string")
    history = entry.get("history") or []
    if not isinstance(history, list) or not all(isinstance(part, str) for part in history):
        raise TopsailError(f"{where}: history must be a list of strings (a conversation's earlier turns)")
    turn = entry.get("turn")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
        raise TopsailError(f"{where}: turn must be a positive integer, got {turn!r}")
    return Prompt(text=text, input_tokens=input_tokens, output_tokens=output_tokens, system_prompt=system_prompt,
                  model=model, history=tuple(history), turn=turn)


def first_int(entry: dict[str, Any], keys: tuple[str, ...], where: str) -> int:
    for key in keys:
        if key in entry:
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TopsailError(f"{where}: {key} must be a non-negative integer, got {value!r}")
            return value
    raise TopsailError(f"{where}: needs one of {', '.join(keys)}")


@dataclass(frozen=True)
class Lengths:
    """Token lengths: a normal distribution of ``mean`` and ``stdev`` (0: always ``mean``), rounded and clipped to
    [``min``, ``max``]."""

    mean: int
    stdev: float = 0.0
    min: int = 1
    max: int | None = None

    def draw(self, rng: random.Random) -> int:
        value = round(rng.gauss(self.mean, self.stdev)) if self.stdev else self.mean
        return max(self.min, min(value, self.max) if self.max is not None else value)


SHORT_WORDS = tuple(word for word in WORDS if len(word) <= 7)  # one toy token each (tgis/tokenizer.py)


def synthetic_prompts(count: int, input_tokens: Lengths, output_tokens: Lengths, seed: int = 0,
                      tokenizer: Path | None = None) -> list[Prompt]:
    """``count`` prompts whose lengths follow the distributions (seeded); each prompt's ``input_tokens`` is its
    text's real token count: the toy tokenizer's, or the tokenizer file's."""
    rng = random.Random(seed)
    encode = file_tokenizer(tokenizer) if tokenizer is not None else None
    prompts = []
    for number in range(count):
        wanted, output = input_tokens.draw(rng), output_tokens.draw(rng)
        words = [SHORT_WORDS[(number + i * 7) % len(SHORT_WORDS)] for i in range(max(wanted, 1) * 2)]
        if encode is None:
            text, actual = " ".join(words[:wanted]), wanted
        else:
            text, actual = encode(" ".join(words), wanted)
        prompts.append(Prompt(text=text, input_tokens=actual, output_tokens=output))
    return prompts


def file_tokenizer(path: Path) -> Callable[[str, int], tuple[str, int]]:
    """(text, n) -> the text cut to its first n tokens of the tokenizer file, and its real token count."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TopsailError(f"tokenizer {path}: reading a tokenizer file needs the tokenizers package "
                           "(pip install 'pytest-topsail[tokenizer]')") from None
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:  # the library raises plain Exceptions for a missing or malformed file
        raise TopsailError(f"tokenizer {path}: not a tokenizers file (tokenizer.json): {error}") from None

    def cut(text: str, count: int) -> tuple[str, int]:
        prefix = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False).ids[:count])
        return prefix, len(tokenizer.encode(prefix, add_special_tokens=False).ids)

    return cut


FILTERS = ("min_input_tokens", "max_input_tokens", "min_output_tokens", "max_output_tokens", "max_sequence_tokens")


def filter_prompts(prompts: list[Prompt], where: str, **limits: int | None) -> list[Prompt]:
    """llm-load-test's dataset filters (``FILTERS``; None: no limit); a TopsailError naming the filters and the
    dataset's lengths when none is left."""
    given = {name: value for name, value in limits.items() if value is not None}
    if not given:
        return prompts

    def keep(prompt: Prompt) -> bool:
        inputs, outputs = prompt.input_tokens, prompt.output_tokens
        return (given.get("min_input_tokens", 0) <= inputs <= given.get("max_input_tokens", math.inf)
                and given.get("min_output_tokens", 0) <= outputs <= given.get("max_output_tokens", math.inf)
                and inputs + outputs <= given.get("max_sequence_tokens", math.inf))

    kept = [prompt for prompt in prompts if keep(prompt)]
    if not kept:
        inputs = [p.input_tokens for p in prompts]
        outputs = [p.output_tokens for p in prompts]
        raise TopsailError(f"{where}: no prompt left after the filters "
                           + ", ".join(f"{name}={value}" for name, value in given.items())
                           + f" (its {len(prompts)} prompts: input tokens {min(inputs)}-{max(inputs)}, output tokens "
                           f"{min(outputs)}-{max(outputs)})")
    return kept


def synthetic(count: int, input_tokens: tuple[int, int], output_tokens: tuple[int, int],
              seed: int = 0) -> list[Prompt]:
    """Prompts of whitespace-separated words, lengths uniform in the given inclusive ranges (seeded)."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        n_in = rng.randint(*input_tokens)
        text = " ".join(WORDS[(i * 7 + n_in) % len(WORDS)] for i in range(n_in))
        prompts.append(Prompt(text=text, input_tokens=n_in, output_tokens=rng.randint(*output_tokens)))
    return prompts


def prompt_entry(prompt: Prompt) -> dict[str, Any]:
    """The prompt as a line of our JSON-lines format (``parse_entry`` reads it back)."""
    entry: dict[str, Any] = {"prompt": prompt.text, "input_tokens": prompt.input_tokens,
                             "output_tokens": prompt.output_tokens}
    if prompt.system_prompt:
        entry["system_prompt"] = prompt.system_prompt
    if prompt.model:
        entry["model"] = prompt.model
    if prompt.turn is not None:
        entry.update(history=list(prompt.history), turn=prompt.turn)
    return entry


def write_dataset(prompts: list[Prompt], path: Path) -> None:
    with path.open("w", encoding="utf-8") as file:
        for prompt in prompts:
            file.write(json.dumps(prompt_entry(prompt)) + "\n")
