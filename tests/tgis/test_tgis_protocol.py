"""The fmaas protocol: checked-in stubs match generation.proto, and our messages use the reference field numbers.

The wire check does not trust the stubs: it reads the encoded bytes with a hand-written protobuf wire decoder and
builds bytes by hand for the stubs to parse, with the field numbers of TGIS's generation.proto.
"""

from __future__ import annotations

import math
import struct
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis import protogen

# ---- a minimal protobuf wire-format codec (varint, 64-bit, length-delimited, 32-bit) ----


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def decode(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of each field in encoding order."""
    fields: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        value: object
        if wire_type == 0:
            value, pos = read_varint(data, pos)
        elif wire_type == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire_type == 2:
            length, pos = read_varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire_type == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"unexpected wire type {wire_type}")
        fields.append((number, wire_type, value))
    return fields


def as_dict(data: bytes) -> dict[int, list[Any]]:
    result: dict[int, list[Any]] = {}
    for number, _wire_type, value in decode(data):
        result.setdefault(number, []).append(value)
    return result


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def field_float(number: int, value: float) -> bytes:
    return varint(number << 3 | 5) + struct.pack("<f", value)


def f32(raw: object) -> float:
    assert isinstance(raw, bytes)
    return struct.unpack("<f", raw)[0]


# ---- tests ----


def test_checked_in_stubs_match_the_proto(tmp_path: Path) -> None:
    """Byte for byte with the grpcio-tools that made them; with another version, the same serialized descriptor."""
    pytest.importorskip("grpc_tools")
    here = Path(protogen.__file__).parent
    same_tools = f"GRPC_GENERATED_VERSION = '{version('grpcio-tools')}'" in (
        here / "generation_pb2_grpc.py").read_text()
    for generated in protogen.generate(tmp_path):
        checked_in = here / generated.name
        if same_tools:
            assert checked_in.read_text() == generated.read_text(), (
                f"{checked_in.name} is stale: run python -m pytest_topsail.tgis.protogen")
        elif generated.name == "generation_pb2.py":
            assert descriptor_line(checked_in) == descriptor_line(generated), (
                f"{checked_in.name} is stale: run python -m pytest_topsail.tgis.protogen")


def descriptor_line(path: Path) -> str:
    return next(line for line in path.read_text().splitlines() if "AddSerializedFile" in line)


def test_generation_request_encodes_with_reference_field_numbers() -> None:
    request = pb.BatchedGenerationRequest(
        model_id="flan", prefix_id="pfx", adapter_id="lora",
        requests=[pb.GenerationRequest(text="hello"), pb.GenerationRequest(text="bye")],
        params=pb.Parameters(
            method=pb.SAMPLE,
            sampling=pb.SamplingParameters(temperature=0.5, top_k=7, top_p=0.25, typical_p=0.75, seed=99),
            stopping=pb.StoppingCriteria(max_new_tokens=30, min_new_tokens=3, time_limit_millis=500,
                                         stop_sequences=["\n\n", "END"], include_stop_sequence=False),
            response=pb.ResponseOptions(input_text=True, generated_tokens=True, input_tokens=True,
                                        token_logprobs=True, token_ranks=True, top_n_tokens=4),
            decoding=pb.DecodingParameters(
                repetition_penalty=1.5,
                length_penalty=pb.DecodingParameters.LengthPenalty(start_index=5, decay_factor=1.25),
                regex="[a-z]+"),
            truncate_input_tokens=64))
    top = as_dict(request.SerializeToString())
    assert top[1] == [b"flan"] and top[2] == [b"pfx"] and top[4] == [b"lora"]
    assert [as_dict(r)[2] for r in top[3]] == [[b"hello"], [b"bye"]]  # GenerationRequest.text = 2
    params = as_dict(top[10][0])
    assert params[1] == [1] and params[6] == [64]
    sampling = as_dict(params[2][0])
    assert f32(sampling[1][0]) == 0.5 and sampling[2] == [7] and f32(sampling[3][0]) == 0.25
    assert f32(sampling[4][0]) == 0.75 and sampling[5] == [99]
    stopping = as_dict(params[3][0])
    assert stopping[1] == [30] and stopping[2] == [3] and stopping[3] == [500]
    assert stopping[4] == [b"\n\n", b"END"] and stopping[5] == [0]  # optional bool: present even when false
    response = as_dict(params[4][0])
    assert {n: v for n, v in response.items()} == {1: [1], 2: [1], 3: [1], 4: [1], 5: [1], 6: [4]}
    decoding = as_dict(params[5][0])
    assert f32(decoding[1][0]) == 1.5 and decoding[5] == [b"[a-z]+"]
    length_penalty = as_dict(decoding[2][0])
    assert length_penalty[1] == [5] and f32(length_penalty[2][0]) == 1.25


def test_guided_oneof_uses_fields_3_to_7() -> None:
    cases = {
        3: pb.DecodingParameters(format=pb.DecodingParameters.JSON),
        4: pb.DecodingParameters(json_schema="{}"),
        5: pb.DecodingParameters(regex="a"),
        6: pb.DecodingParameters(choice=pb.DecodingParameters.StringChoices(choices=["x", "y"])),
        7: pb.DecodingParameters(grammar="root ::= x"),
    }
    for number, message in cases.items():
        assert list(as_dict(message.SerializeToString())) == [number]
    both = pb.DecodingParameters(regex="a")
    both.grammar = "g"
    assert both.WhichOneof("guided") == "grammar"


def test_hand_encoded_response_decodes_with_our_stubs() -> None:
    top_token = field_bytes(2, "▁b") + field_float(3, -0.5)
    token = field_bytes(2, "▁a") + field_float(3, -1.5) + field_varint(4, 2) + field_bytes(5, top_token)
    response = (field_varint(6, 11) + field_varint(2, 3) + field_bytes(4, " a b") + field_varint(7, 5)
                + field_bytes(11, "b") + field_varint(10, 4242) + field_bytes(8, token) + field_bytes(9, token))
    parsed = pb.BatchedGenerationResponse.FromString(field_bytes(1, response)).responses[0]
    assert (parsed.input_token_count, parsed.generated_token_count, parsed.text) == (11, 3, " a b")
    assert parsed.stop_reason == pb.STOP_SEQUENCE and parsed.stop_sequence == "b" and parsed.seed == 4242
    assert parsed.tokens[0].text == "▁a" and parsed.tokens[0].rank == 2 and math.isclose(parsed.tokens[0].logprob, -1.5)
    assert parsed.tokens[0].top_tokens[0].text == "▁b" and parsed.input_tokens[0].text == "▁a"


def test_tokenize_and_model_info_field_numbers() -> None:
    request = pb.BatchedTokenizeRequest(model_id="m", requests=[pb.TokenizeRequest(text="hi")], return_tokens=True,
                                        return_offsets=True, truncate_input_tokens=9, prefix_id="p", adapter_id="a")
    fields = as_dict(request.SerializeToString())
    assert fields[1] == [b"m"] and as_dict(fields[2][0])[1] == [b"hi"] and fields[3] == [1] and fields[4] == [1]
    assert fields[5] == [9] and fields[6] == [b"p"] and fields[7] == [b"a"]
    offset = field_varint(1, 3) + field_varint(2, 8)
    tokenized = field_varint(1, 2) + field_bytes(2, "▁hi") + field_bytes(2, "!") + field_bytes(3, offset)
    parsed = pb.BatchedTokenizeResponse.FromString(field_bytes(1, tokenized)).responses[0]
    assert parsed.token_count == 2 and list(parsed.tokens) == ["▁hi", "!"]
    assert (parsed.offsets[0].start, parsed.offsets[0].end) == (3, 8)
    info = pb.ModelInfoResponse.FromString(field_varint(1, 1) + field_varint(2, 2048) + field_varint(3, 1024))
    assert info.model_kind == pb.ModelInfoResponse.ENCODER_DECODER
    assert (info.max_sequence_length, info.max_new_tokens) == (2048, 1024)
    assert as_dict(pb.ModelInfoRequest(model_id="x").SerializeToString()) == {1: [b"x"]}


def test_enum_numbers_match_the_reference() -> None:
    assert [pb.DecodingMethod.Value(n) for n in ("GREEDY", "SAMPLE")] == [0, 1]
    names = ["NOT_FINISHED", "MAX_TOKENS", "EOS_TOKEN", "CANCELLED", "TIME_LIMIT", "STOP_SEQUENCE", "TOKEN_LIMIT",
             "ERROR"]
    assert [pb.StopReason.Value(name) for name in names] == list(range(8))
    service = pb.DESCRIPTOR.services_by_name["GenerationService"]
    assert service.full_name == "fmaas.GenerationService"
    assert [m.name for m in service.methods] == ["Generate", "GenerateStream", "Tokenize", "ModelInfo"]
    assert service.methods_by_name["GenerateStream"].server_streaming
