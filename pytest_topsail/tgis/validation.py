"""TGIS request validation: protobuf Parameters -> DecodingSettings, or TGIS's own INVALID_ARGUMENT message.

Checks run in TGIS's order and stop at the first failure; messages and limits are TGIS's (the top_n limit and its
message are vllm-tgis-adapter's). Sampling parameters count only with method SAMPLE: with GREEDY they are ignored,
as in TGIS. An unseeded sampling request gets a random 32-bit seed, reported back in the response.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis.toymodel import DecodingSettings, random_seed

MAX_TOP_N_TOKENS = 10
MAX_STOP_SEQS = 6
MAX_STOP_SEQ_LENGTH = 240  # UTF-8 bytes
DEFAULT_MAX_NEW_TOKENS = 20
STOP_SEQUENCES_MESSAGE = (f"can specify at most {MAX_STOP_SEQS} non-empty stop sequences, each not more than "
                          f"{MAX_STOP_SEQ_LENGTH} UTF8 bytes")


class InvalidRequest(ValueError):
    """A request TGIS rejects with INVALID_ARGUMENT; str() is the message."""


@dataclass(frozen=True)
class ResponseFlags:
    input_text: bool = False
    generated_tokens: bool = False
    input_tokens: bool = False
    logprobs: bool = False
    ranks: bool = False
    top_n: int = 0


@dataclass(frozen=True)
class Limits:
    max_sequence_length: int = 2048
    max_new_tokens: int = 1024
    include_stop_sequence: bool = True  # the launcher's --default-include-stop-seqs


def check_parameters(params: pb.Parameters, limits: Limits) -> tuple[DecodingSettings, ResponseFlags, int]:
    """Settings and response flags of a valid request, and its time limit in ms (0: none); InvalidRequest otherwise."""
    sample = params.method == pb.SAMPLE
    sampling, stopping, decoding, response = params.sampling, params.stopping, params.decoding, params.response
    temperature = sampling.temperature if sample else 0.0
    top_p = (sampling.top_p or 1.0) if sample else 1.0
    typical_p = (sampling.typical_p or 1.0) if sample else 1.0
    top_k = sampling.top_k if sample else 0
    max_new_tokens = stopping.max_new_tokens or DEFAULT_MAX_NEW_TOKENS
    repetition_penalty = decoding.repetition_penalty or 1.0
    length_penalty = decoding.length_penalty if decoding.HasField("length_penalty") else None

    if temperature != 0.0 and temperature < 0.05:
        raise InvalidRequest("temperature must be >= 0.05")
    if top_p <= 0.0 or top_p > 1.0:
        raise InvalidRequest("top_p must be > 0.0 and <= 1.0")
    if typical_p > 1.0:
        raise InvalidRequest("typical_p must be <= 1.0")
    if max_new_tokens > limits.max_new_tokens:
        raise InvalidRequest(f"max_new_tokens must be <= {limits.max_new_tokens}")
    if stopping.min_new_tokens > max_new_tokens:
        raise InvalidRequest("min_new_tokens must be <= max_new_tokens")
    if repetition_penalty <= 0.0:
        raise InvalidRequest("repetition_penalty must be > 0.0")
    if length_penalty is not None and not 1.0 <= length_penalty.decay_factor <= 10.0:
        raise InvalidRequest("length_penalty must be >= 1.0 and <= 10.0")
    if len(stopping.stop_sequences) > MAX_STOP_SEQS:
        raise InvalidRequest(STOP_SEQUENCES_MESSAGE)
    if response.top_n_tokens > MAX_TOP_N_TOKENS:
        raise InvalidRequest(f"top_n_tokens ({response.top_n_tokens}) must be <= {MAX_TOP_N_TOKENS}")
    if (response.token_logprobs or response.token_ranks or response.top_n_tokens) and not (
            response.input_tokens or response.generated_tokens):
        raise InvalidRequest("must request input and/or generated tokens to request extra token detail")
    if any(not s or len(s.encode()) > MAX_STOP_SEQ_LENGTH for s in stopping.stop_sequences):
        raise InvalidRequest(STOP_SEQUENCES_MESSAGE)

    if sample:
        seed = sampling.seed if sampling.HasField("seed") else random_seed()
    else:
        seed = 0
    settings = DecodingSettings(
        sample=sample, temperature=temperature or 1.0, top_k=top_k, top_p=top_p, typical_p=typical_p, seed=seed,
        repetition_penalty=repetition_penalty,
        length_penalty=(length_penalty.start_index, length_penalty.decay_factor) if length_penalty else None,
        min_new_tokens=stopping.min_new_tokens, max_new_tokens=max_new_tokens,
        stop_sequences=tuple(stopping.stop_sequences),
        include_stop_sequence=(stopping.include_stop_sequence if stopping.HasField("include_stop_sequence")
                               else limits.include_stop_sequence),
        top_n_tokens=response.top_n_tokens)
    flags = ResponseFlags(response.input_text, response.generated_tokens, response.input_tokens,
                          response.token_logprobs, response.token_ranks, response.top_n_tokens)
    return settings, flags, stopping.time_limit_millis


def check_input_length(settings: DecodingSettings, input_length: int, prefix_length: int,
                       limits: Limits) -> DecodingSettings:
    """Settings fitted to the sequence length (TOKEN_LIMIT once max_new_tokens is cut); InvalidRequest if too long."""
    effective = input_length + prefix_length
    if effective >= limits.max_sequence_length:
        raise InvalidRequest(f"input tokens ({input_length}) plus prefix length ({prefix_length}) must be < "
                             f"{limits.max_sequence_length}")
    if effective + settings.min_new_tokens > limits.max_sequence_length:
        raise InvalidRequest(f"input tokens ({input_length}) plus prefix length ({prefix_length}) plus "
                             f"min_new_tokens ({settings.min_new_tokens}) must be <= {limits.max_sequence_length}")
    room = limits.max_sequence_length - effective
    if settings.max_new_tokens > room:
        return replace(settings, max_new_tokens=room, max_is_token_limit=True)
    return settings
