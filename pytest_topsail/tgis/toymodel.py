"""The deterministic stand-in model of the reference server (no I/O, no gRPC: the HTTP front uses it too).

Next-token scores are pseudo-random, picked by a blake2b digest of everything before the position (model name,
prefix, input and generated pieces) from a fixed table of normal draws (seeded once, so building a score vector is two
row look-ups), over a small English vocabulary plus `</s>`. So the
same request gives the same answer in every process (no Python hash()), and different prompts give different
answers. On these scores the usual decoding runs: greedy, or sampling with a seeded generator, temperature, top_k,
top_p, typical_p; repetition penalty; the EOS score grows with length (length penalty adds to it) and is masked
until min_new_tokens. Stop criteria: max_new_tokens, EOS, stop sequences, token limit, time limit (by the caller's
clock). The model config never changes the text: it adds noise of its dtype's size to reported logprobs only.
`diverge=True` salts the digests, so that one config gives different text (for proving a suite catches failures).
What it is not: a language model. The text is plausible-looking word salad.
"""

from __future__ import annotations

import hashlib
import math
import random
import secrets
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from pytest_topsail.tgis.tokenizer import EOS, SPACE_MARK, detokenize

_WORDS = (
    "the of and to in is was for that on as with by he at from his an were are which this be or has had not but "
    "first one their its new after who they have her she two been other when there all during into school time may "
    "years more most only over city some world would where later up such used many can state about national out "
    "known university united then made three high part these between both under well team film while year american "
    "since season any game each called many group became being north south area river early government because "
    "through second against long music however work system within life played public several law main day people "
    "house album until series place following model data token server request model cluster node memory latency "
    "answer question light water green small large every example number result value point line order power field"
).split()
VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(
    [SPACE_MARK + word for word in _WORDS] + [".", ",", ";", ":", "!", "?", "\n", SPACE_MARK + "-", EOS]))
EOS_ID = VOCABULARY.index(EOS)
_PRIOR = -0.6 * np.log1p(np.arange(len(VOCABULARY), dtype=np.float64))
_TABLE_ROWS = 4096
_TABLE = np.random.default_rng(20240611).standard_normal((_TABLE_ROWS, len(VOCABULARY)))
_EOS_BASE, _EOS_GROWTH = -4.0, 0.25
# relative noise on reported logprobs, by dtype (reference configs differ by less than TGIS's rel=5e-4)
DTYPE_NOISE = {"float32": 1e-6, "float16": 1e-4, "bfloat16": 3e-4}


class StopReason(IntEnum):  # same numbers as fmaas.StopReason
    NOT_FINISHED = 0
    MAX_TOKENS = 1
    EOS_TOKEN = 2
    CANCELLED = 3
    TIME_LIMIT = 4
    STOP_SEQUENCE = 5
    TOKEN_LIMIT = 6
    ERROR = 7


@dataclass(frozen=True)
class DecodingSettings:
    """A validated request's decoding parameters, TGIS defaults already applied."""

    sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    typical_p: float = 1.0
    seed: int = 0  # used only when sampling
    repetition_penalty: float = 1.0
    length_penalty: tuple[int, float] | None = None  # (start_index, decay_factor)
    min_new_tokens: int = 0
    max_new_tokens: int = 20
    max_is_token_limit: bool = False  # max_new_tokens was cut to fit the sequence length
    stop_sequences: tuple[str, ...] = ()
    include_stop_sequence: bool = True
    top_n_tokens: int = 0


@dataclass(frozen=True)
class TokenDetail:
    text: str
    logprob: float
    rank: int
    top_tokens: tuple[tuple[str, float], ...] = ()


@dataclass
class Step:
    """What one decoding step produced: the token, the text it adds (may be empty) and the stop reason."""

    token: TokenDetail
    text: str
    stop_reason: StopReason = StopReason.NOT_FINISHED


class ToyModel:
    def __init__(self, model_name: str, *, config_name: str = "", dtype: str = "float16",
                 diverge: bool = False, output_special_tokens: bool = False) -> None:
        self.model_name = model_name
        self.salt = f"{model_name}|diverged" if diverge else model_name
        self.noise = DTYPE_NOISE.get(dtype, 0.0)
        self.noise_key = f"{config_name or dtype}".encode()
        self.output_special_tokens = output_special_tokens

    def context(self, tokens: Sequence[str] = ()) -> hashlib.blake2b:
        digest = hashlib.blake2b(self.salt.encode(), digest_size=16)
        digest.update("".join(token + "\x00" for token in tokens).encode())  # the same bytes as _feed, at once
        return digest

    def scores(self, context: hashlib.blake2b) -> np.ndarray:
        digest = context.digest()
        first = int.from_bytes(digest[:4], "little") % _TABLE_ROWS
        second = int.from_bytes(digest[4:8], "little") % _TABLE_ROWS
        return _PRIOR + 2.0 * _TABLE[first] + 1.5 * _TABLE[second]

    def reported(self, logprob: float, position: int, text: str) -> float:
        """A logprob with this config's dtype-sized deterministic noise."""
        if not self.noise or math.isnan(logprob):
            return logprob
        key = hashlib.blake2b(self.noise_key + struct.pack("<q", position) + text.encode(), digest_size=8).digest()
        unit = int.from_bytes(key, "little") / 2**64 * 2 - 1
        return logprob * (1 + self.noise * unit)

    def input_details(self, tokens: Sequence[str], context_tokens: Sequence[str] = (),
                      top_n: int = 0) -> list[TokenDetail]:
        """Token detail of each input token under the model; the first has logprob NaN, as TGIS reports."""
        details = []
        context = self.context(context_tokens)
        for position, token in enumerate(tokens):
            if position == 0 and not context_tokens:
                details.append(TokenDetail(token, math.nan, 0))
            else:
                logprobs = _log_softmax(self.scores(context))
                logprob, rank = _score_of(token, logprobs, context)
                details.append(TokenDetail(token, self.reported(logprob, -1 - position, token), rank,
                                           self._top(logprobs, top_n, -1 - position)))
            _feed(context, token)
        return details

    def _top(self, logprobs: np.ndarray, top_n: int, position: int) -> tuple[tuple[str, float], ...]:
        if not top_n:
            return ()
        best = np.argsort(-logprobs, kind="stable")[:top_n]
        return tuple((VOCABULARY[i], self.reported(float(logprobs[i]), position, VOCABULARY[i])) for i in best)


class Generation:
    """One request's decoding: call `step()` until `finished`; `text`, `stop_reason`, `tokens` hold the result."""

    def __init__(self, model: ToyModel, context_tokens: Sequence[str], settings: DecodingSettings,
                 *, deadline: float | None = None, clock: Callable[[], float] | None = None) -> None:
        self.model = model
        self.settings = settings
        self.deadline = deadline
        self.clock = clock
        self._context = model.context(context_tokens)
        self._seen = {_VOCAB_INDEX[t] for t in context_tokens if t in _VOCAB_INDEX}
        self._rng = random.Random(settings.seed) if settings.sample else None
        self.tokens: list[TokenDetail] = []
        self.text = ""
        self._emitted = 0
        self.stop_reason = StopReason.NOT_FINISHED
        self.stop_sequence = ""
        self.cached_tokens: int | None = None  # prompt tokens found in the server's prefix cache (None: no cache)

    @property
    def finished(self) -> bool:
        return self.stop_reason != StopReason.NOT_FINISHED

    def step(self) -> Step:
        settings = self.settings
        position = len(self.tokens)
        scores = self.model.scores(self._context)
        scores = self._penalised(scores, position)
        if settings.sample and settings.temperature != 1.0:
            scores /= settings.temperature
        logprobs = _log_softmax(scores)
        chosen = self._choose(logprobs)
        token_text = VOCABULARY[chosen]
        rank = 1 + int(np.count_nonzero(logprobs > logprobs[chosen]))
        detail = TokenDetail(token_text, self.model.reported(float(logprobs[chosen]), position, token_text), rank,
                             self.model._top(logprobs, settings.top_n_tokens, position))
        self.tokens.append(detail)
        self._seen.add(chosen)
        _feed(self._context, token_text)
        if token_text != EOS or self.model.output_special_tokens:
            self.text += detokenize([token_text], special=self.model.output_special_tokens)
        self.stop_reason = self._stop_reason(chosen)
        return Step(detail, self._new_text(), self.stop_reason)

    def cancel(self, reason: StopReason = StopReason.CANCELLED) -> None:
        self.stop_reason = reason

    def _penalised(self, scores: np.ndarray, generated: int) -> np.ndarray:
        settings = self.settings  # `scores` is a fresh array: changed in place
        if settings.repetition_penalty != 1.0 and self._seen:
            seen = np.fromiter(self._seen, dtype=np.int64)
            values = scores[seen]
            scores[seen] = np.where(values > 0, values / settings.repetition_penalty,
                                    values * settings.repetition_penalty)
        eos = _EOS_BASE + _EOS_GROWTH * generated
        if settings.length_penalty and generated > settings.length_penalty[0]:
            eos += (generated - settings.length_penalty[0]) * math.log(settings.length_penalty[1])
        scores[EOS_ID] = eos if generated >= settings.min_new_tokens else -np.inf
        return scores

    def _choose(self, logprobs: np.ndarray) -> int:
        if self._rng is None:
            return int(logprobs.argmax())
        probabilities = _filtered(np.exp(logprobs), self.settings)
        cumulative = np.cumsum(probabilities)
        draw = self._rng.random() * cumulative[-1]
        return int(min(np.searchsorted(cumulative, draw, side="right"), len(cumulative) - 1))

    def _stop_reason(self, chosen: int) -> StopReason:
        settings = self.settings
        if chosen == EOS_ID:
            return StopReason.EOS_TOKEN
        if settings.stop_sequences and self._cut_at_stop_sequence():
            return StopReason.STOP_SEQUENCE
        if len(self.tokens) >= settings.max_new_tokens:
            return StopReason.TOKEN_LIMIT if settings.max_is_token_limit else StopReason.MAX_TOKENS
        if self.deadline is not None and self.clock is not None and self.clock() >= self.deadline:
            return StopReason.TIME_LIMIT
        return StopReason.NOT_FINISHED

    def _cut_at_stop_sequence(self) -> bool:
        longest = max(len(s) for s in self.settings.stop_sequences)
        window_start = max(0, len(self.text) - len(self.tokens[-1].text) - longest)
        found = [(self.text.find(s, window_start), s) for s in self.settings.stop_sequences]
        found = [(index, s) for index, s in found if index >= 0]
        if not found:
            return False
        index, sequence = min(found)
        self.stop_sequence = sequence
        self.text = self.text[:index + len(sequence)] if self.settings.include_stop_sequence else self.text[:index]
        return True

    def _new_text(self) -> str:
        """Text not yet handed out; while unfinished, a tail that may start a stop sequence is held back."""
        end = len(self.text)
        if not self.finished:
            end -= _held_back(self.text, self.settings.stop_sequences)
        new, self._emitted = self.text[self._emitted:end], max(self._emitted, end)
        return new


_VOCAB_INDEX = {token: index for index, token in enumerate(VOCABULARY)}


def _feed(context: hashlib.blake2b, token: str) -> None:
    context.update((token + "\x00").encode())


def _log_softmax(scores: np.ndarray) -> np.ndarray:
    top = scores.max()  # finite: only EOS may be -inf
    return scores - (top + math.log(float(np.exp(scores - top).sum())))


def _score_of(token: str, logprobs: np.ndarray, context: hashlib.blake2b) -> tuple[float, int]:
    """Logprob and rank of an input token; one outside the vocabulary gets a low score derived from its digest."""
    index = _VOCAB_INDEX.get(token)
    if index is not None:
        return float(logprobs[index]), 1 + int(np.count_nonzero(logprobs > logprobs[index]))
    digest = context.copy()
    _feed(digest, token)
    unit = int.from_bytes(digest.digest()[:8], "little") / 2**64
    logprob = float(logprobs.min()) - 1.0 - 8.0 * unit
    return logprob, len(VOCABULARY) + 1 + int(unit * 30000)


def _filtered(probabilities: np.ndarray, settings: DecodingSettings) -> np.ndarray:
    """Probabilities after top_k, top_p and typical_p (unnormalised; removed tokens are 0)."""
    kept = probabilities.copy()
    order = np.argsort(-kept, kind="stable")
    if settings.top_k and settings.top_k < len(kept):
        kept[order[settings.top_k:]] = 0.0
    if settings.top_p < 1.0:
        cumulative = np.cumsum(kept[order]) / kept.sum()
        cut = int(np.searchsorted(cumulative, settings.top_p)) + 1
        kept[order[cut:]] = 0.0
    if settings.typical_p < 1.0:
        normalised = kept / kept.sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.where(normalised > 0, np.log(normalised), 0.0)
        entropy = -float((normalised * logs).sum())
        surprise_gap = np.where(normalised > 0, np.abs(-logs - entropy), np.inf)
        typical_order = np.argsort(surprise_gap, kind="stable")
        cumulative = np.cumsum(normalised[typical_order])
        cut = int(np.searchsorted(cumulative, settings.typical_p)) + 1
        kept[typical_order[cut:]] = 0.0
    return kept


def _held_back(text: str, stop_sequences: Sequence[str]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of a stop sequence."""
    held = 0
    for sequence in stop_sequences:
        for length in range(min(len(sequence) - 1, len(text)), held, -1):
            if text.endswith(sequence[:length]):
                held = length
                break
    return held


def random_seed() -> int:
    """A fresh 32-bit seed for an unseeded sampling request (reported back to the client, as TGIS does)."""
    return secrets.randbits(32)

