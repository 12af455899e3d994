"""A sentencepiece-like toy tokenizer: words become pieces with `▁` marking a preceding space, `</s>` ends a sequence.

Rules: the text gets a dummy prefix space (the first word is `▁word`); a single space before a word or a punctuation
mark joins it as `▁`; any other space is a `▁` piece of its own; a newline is the piece "\n"; punctuation marks are
pieces of their own; a word longer than 7 characters is cut into pieces of at most 5 (only the first carries `▁`).
Offsets are character offsets of each piece's own characters (the marked space is not part of them).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

SPACE_MARK = "▁"
EOS = "</s>"
_SEGMENTS = re.compile(r"\s|\w+|[^\w\s]")
_LONG_WORD = 7
_PIECE = 5


class Piece(NamedTuple):
    text: str
    start: int
    end: int


@functools.lru_cache(maxsize=4096)  # load tests send the same prompts again and again
def tokenize(text: str) -> tuple[Piece, ...]:
    return tuple(_tokenize(text))


def _tokenize(text: str) -> list[Piece]:
    pieces: list[Piece] = []
    pending_space = True  # sentencepiece's dummy prefix
    for match in _SEGMENTS.finditer(text):
        segment, start = match.group(), match.start()
        if segment == " ":
            if pending_space:
                pieces.append(Piece(SPACE_MARK, start - 1 if start else start, start))
            pending_space = True
            continue
        if segment.isspace():
            if pending_space and start:
                pieces.append(Piece(SPACE_MARK, start - 1, start))
            pieces.append(Piece(segment, start, start + 1))
            pending_space = False
            continue
        if len(segment) <= _LONG_WORD:  # the common case, inline
            pieces.append(Piece(SPACE_MARK + segment if pending_space else segment, start, start + len(segment)))
        else:
            pieces.extend(_word_pieces(segment, start, pending_space))
        pending_space = False
    if pending_space and text.endswith(" "):
        pieces.append(Piece(SPACE_MARK, len(text) - 1, len(text)))
    return pieces


def _word_pieces(word: str, start: int, spaced: bool) -> list[Piece]:
    size = len(word) if len(word) <= _LONG_WORD else _PIECE
    pieces = []
    for offset in range(0, len(word), size):
        chunk = word[offset:offset + size]
        mark = SPACE_MARK if spaced and offset == 0 else ""
        pieces.append(Piece(mark + chunk, start + offset, start + offset + len(chunk)))
    return pieces


def token_texts(text: str) -> list[str]:
    return [piece.text for piece in tokenize(text)]


def detokenize(tokens: list[str], *, special: bool = False) -> str:
    """The text of generated pieces: `▁` becomes a space; `</s>` is dropped unless `special`."""
    return "".join(t for t in tokens if special or t != EOS).replace(SPACE_MARK, " ")
