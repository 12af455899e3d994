"""Multi-turn conversations: each turn's prompt carries the conversation's earlier turns, the user's messages and the
answers (``Prompt.history``), so its input grows turn after turn, and a server's prefix cache can reuse the previous
turn's whole prompt (the history is the dataset's own answers, not the server's: every run sends the same prompts).

A conversation is a run of prompts numbered by ``turn`` from 1; the load generator gives each user one conversation
at a time, its turns in order, ``think_time_s`` apart (generator.py).
- ``sharegpt_conversations``: a local ShareGPT-format JSON file: a list of ``{"conversations": [{"from": "human" |
  "gpt" | "system", "value": text}, ...]}``; each human message answered by a gpt message is a turn, the answer's
  length (toy tokens of the reference server) its output length; a leading system message is the system prompt.
- ``synthetic_conversations``: ``conversations`` x ``turns`` turns of random toy words, ``input_tokens`` per user
  message and ``output_tokens`` per answer (seeded).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_topsail.errors import TopsailError
from pytest_topsail.llmload.dataset import Prompt
from pytest_topsail.llmload.shared_prefix import random_words
from pytest_topsail.tgis.tokenizer import tokenize

USER_ROLES = ("human", "user")
ASSISTANT_ROLES = ("gpt", "chatgpt", "assistant", "bard", "bing", "model")


def toy_tokens(text: str) -> int:
    """The text's length in tokens of the reference server's toy tokenizer (what its ``usage`` reports)."""
    return len(tokenize(text))


def conversation_prompts(turns: Sequence[tuple[str, str]], system_prompt: str = "") -> list[Prompt]:
    """One prompt per (user message, answer) turn, each carrying the turns before it."""
    prompts: list[Prompt] = []
    history: tuple[str, ...] = ()
    for number, (message, answer) in enumerate(turns, start=1):
        prompt = Prompt(text=message, input_tokens=0, output_tokens=max(1, toy_tokens(answer)),
                        system_prompt=system_prompt, history=history, turn=number)
        prompts.append(replace(prompt, input_tokens=toy_tokens(prompt.full_text())))
        history = (*history, message, answer)
    return prompts


def synthetic_conversations(conversations: int, turns: int, input_tokens: int, output_tokens: int,
                            seed: int = 0) -> list[Prompt]:
    rng = random.Random(f"multi-turn/{seed}/{input_tokens}/{output_tokens}")
    prompts = []
    for _ in range(conversations):
        prompts.extend(conversation_prompts([(random_words(rng, input_tokens), random_words(rng, output_tokens))
                                             for _ in range(turns)]))
    return prompts


def sharegpt_conversations(path: Path, max_turns: int | None = None,
                           max_conversations: int | None = None) -> list[Prompt]:
    """The file's conversations (at most ``max_conversations``, each cut to ``max_turns``); those without a
    human message answered are skipped. A TopsailError naming the file and the entry when it is not ShareGPT's."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TopsailError(f"multi-turn dataset {path}: not found") from None
    except (OSError, ValueError) as error:
        raise TopsailError(f"multi-turn dataset {path}: not a JSON file: {error}") from None
    if not isinstance(data, list):
        raise TopsailError(f"multi-turn dataset {path}: expected a list of conversations (ShareGPT's format), got "
                           f"{type(data).__name__}")
    prompts: list[Prompt] = []
    taken = 0
    for number, entry in enumerate(data):
        if max_conversations is not None and taken >= max_conversations:
            break
        system, turns = conversation_turns(entry, f"multi-turn dataset {path}: conversation {number}")
        if turns:
            prompts.extend(conversation_prompts(turns[:max_turns], system))
            taken += 1
    if not prompts:
        raise TopsailError(f"multi-turn dataset {path}: no conversation has a human message answered by a gpt one")
    return prompts


def conversation_turns(entry: Any, where: str) -> tuple[str, list[tuple[str, str]]]:
    """(system prompt, [(user message, answer), ...]) of one ShareGPT entry; consecutive messages of one side are
    joined, a last unanswered message dropped."""
    messages = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(messages, list):
        raise TopsailError(f"{where}: needs a 'conversations' list of {{from, value}} messages")
    system = ""
    sides: list[list[str]] = []  # [role, text] with role "user" or "assistant", one side after the other
    for position, message in enumerate(messages):
        role, text = (message.get("from"), message.get("value")) if isinstance(message, dict) else (None, None)
        if not isinstance(role, str) or not isinstance(text, str):
            raise TopsailError(f"{where}: message {position} needs string 'from' and 'value'")
        if role == "system" and not sides:
            system = text
            continue
        side = "user" if role in USER_ROLES else "assistant" if role in ASSISTANT_ROLES else None
        if side is None:
            raise TopsailError(f"{where}: message {position}: unknown 'from' {role!r} (known: "
                               f"{', '.join((*USER_ROLES, *ASSISTANT_ROLES, 'system'))})")
        if sides and sides[-1][0] == side:
            sides[-1][1] += "\n" + text
        elif sides or side == "user":  # an answer before any question answers nothing
            sides.append([side, text])
    pairs = [(sides[i][1], sides[i + 1][1]) for i in range(0, len(sides) - 1, 2)]
    return system, pairs


def conversations_of(prompts: Sequence[Prompt]) -> list[list[Prompt]] | None:
    """The prompts as conversations (a new one at each turn 1), or None when they hold none."""
    if not prompts or prompts[0].turn is None:
        return None
    conversations: list[list[Prompt]] = []
    for prompt in prompts:
        if prompt.turn == 1 or not conversations:
            conversations.append([])
        conversations[-1].append(prompt)
    return conversations
