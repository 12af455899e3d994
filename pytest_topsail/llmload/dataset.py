"""Prompts of a load test: text plus the input and output token lengths the request asks for.

Accepted JSON-lines formats (one object per line; blank lines skipped):
- ours: ``{"prompt": str, "input_tokens": int, "output_tokens": int, "system_prompt"?: str}``
- llm-load-test's: ``{"question": str, "tok_input_length": int, "tok_output_length" | "output_tokens": int,
  "system_prompt"?: str}``, its first line being a metadata object (``name``/``dataset_info``, no prompt), skipped.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError

BUNDLED = Path(__file__).parent / "data" / "synthetic.jsonl"
WORDS = ("the model serves tokens fast while the batch grows and the queue waits for a free slot in the "
         "scheduler of the inference server under load").split()


@dataclass(frozen=True)
class Prompt:
    text: str
    input_tokens: int
    output_tokens: int
    system_prompt: str = ""


def load_dataset(path: Path | str, *, limit: int | None = None) -> list[Prompt]:
    """Read a dataset file; any bad line is a TopsailError naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise TopsailError(f"dataset {path}: cannot be read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        bad_line = error.object[:error.start].count(b"\n") + 1
        raise TopsailError(f"dataset {path}:{bad_line}: not UTF-8 text ({error.reason}: byte "
                           f"0x{error.object[error.start]:02x} at offset {error.start}); save it as UTF-8") from None
    prompts: list[Prompt] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise TopsailError(f"dataset {path}:{number}: not JSON: {error.msg}") from None
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
    return Prompt(text=text, input_tokens=input_tokens, output_tokens=output_tokens, system_prompt=system_prompt)


def first_int(entry: dict[str, Any], keys: tuple[str, ...], where: str) -> int:
    for key in keys:
        if key in entry:
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TopsailError(f"{where}: {key} must be a non-negative integer, got {value!r}")
            return value
    raise TopsailError(f"{where}: needs one of {', '.join(keys)}")


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


def write_dataset(prompts: list[Prompt], path: Path) -> None:
    with path.open("w", encoding="utf-8") as file:
        for prompt in prompts:
            entry: dict[str, Any] = {"prompt": prompt.text, "input_tokens": prompt.input_tokens,
                                     "output_tokens": prompt.output_tokens}
            if prompt.system_prompt:
                entry["system_prompt"] = prompt.system_prompt
            file.write(json.dumps(entry) + "\n")
