"""TgisClient against a small in-test servicer: metadata, one channel, deadlines, retries while a server starts."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest

from pytest_topsail.errors import TopsailError
from pytest_topsail.tgis import generation_pb2 as pb
from pytest_topsail.tgis import generation_pb2_grpc as pb_grpc
from pytest_topsail.tgis.client import TgisClient, to_parameters


class EchoServicer(pb_grpc.GenerationServiceServicer):
    """Answers with what it received so the test can see the request and its metadata."""

    def __init__(self) -> None:
        self.peers: set[str] = set()
        self.model_ids: list[str] = []

    def _seen(self, context: grpc.aio.ServicerContext) -> None:
        self.peers.add(context.peer())
        self.model_ids.append(dict(context.invocation_metadata() or ()).get("mm-model-id", ""))

    async def Generate(self, request, context):  # noqa: N802 (gRPC method name)
        self._seen(context)
        if request.requests and request.requests[0].text == "slow":
            await asyncio.sleep(5)
        return pb.BatchedGenerationResponse(responses=[
            pb.GenerationResponse(text=f"{r.text}|{request.params.stopping.max_new_tokens}|{request.prefix_id}")
            for r in request.requests])

    async def GenerateStream(self, request, context):  # noqa: N802
        self._seen(context)
        for count in range(3):
            yield pb.GenerationResponse(generated_token_count=count, text=request.request.text)

    async def Tokenize(self, request, context):  # noqa: N802
        self._seen(context)
        return pb.BatchedTokenizeResponse(responses=[pb.TokenizeResponse(token_count=len(r.text))
                                                     for r in request.requests])

    async def ModelInfo(self, request, context):  # noqa: N802
        self._seen(context)
        return pb.ModelInfoResponse(max_sequence_length=2048, max_new_tokens=1024)


async def start_echo(port: int = 0) -> tuple[grpc.aio.Server, int, EchoServicer]:
    server = grpc.aio.server()
    servicer = EchoServicer()
    pb_grpc.add_GenerationServiceServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound, servicer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_calls_share_one_channel_and_send_the_model_id() -> None:
    async def scenario() -> None:
        server, port, servicer = await start_echo()
        try:
            async with TgisClient(f"127.0.0.1:{port}", model_id="google/flan-t5-small") as client:
                batch = await client.generate(["a", "b"], {"stopping": {"maxNewTokens": 7}}, prefix_id="p1")
                assert [r.text for r in batch.responses] == ["a|7|p1", "b|7|p1"]
                stream = [m async for m in client.generate_stream("s", {"stopping": {"max_new_tokens": 2}})]
                assert [m.generated_token_count for m in stream] == [0, 1, 2]
                tokens = await client.tokenize(["abc"])
                assert tokens.responses[0].token_count == 3
                single = await client.generate("one prompt", {"stopping": {"maxNewTokens": 1}})
                assert [r.text for r in single.responses] == ["one prompt|1|"]
                info = await client.model_info()
                assert info.max_new_tokens == 1024
        finally:
            await server.stop(None)
        assert servicer.model_ids == ["google/flan-t5-small"] * 5
        assert len(servicer.peers) == 1  # one connection for all five calls

    asyncio.run(scenario())


def test_retries_unavailable_until_the_server_starts() -> None:
    async def scenario() -> None:
        port = free_port()

        async def start_late() -> grpc.aio.Server:
            await asyncio.sleep(0.4)
            return (await start_echo(port))[0]

        late = asyncio.create_task(start_late())
        async with TgisClient(f"127.0.0.1:{port}", retries=10, backoff=0.05) as client:
            info = await client.model_info(timeout=5)
        assert info.max_sequence_length == 2048
        await (await late).stop(None)

    asyncio.run(scenario())


def test_gives_up_after_bounded_retries_and_honours_deadlines() -> None:
    async def scenario() -> None:
        async with TgisClient(f"127.0.0.1:{free_port()}", retries=2, backoff=0.01) as client:
            with pytest.raises(grpc.aio.AioRpcError) as unavailable:
                await client.model_info(timeout=1)
            assert unavailable.value.code() == grpc.StatusCode.UNAVAILABLE
        server, port, _ = await start_echo()
        try:
            async with TgisClient(f"127.0.0.1:{port}") as client:
                with pytest.raises(grpc.aio.AioRpcError) as late:
                    await client.generate(["slow"], timeout=0.2)
                assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_bad_parameters_and_ca_file_are_clear_errors(tmp_path) -> None:
    with pytest.raises(TopsailError, match="invalid TGIS parameters.*maxNewTokenz"):
        to_parameters({"stopping": {"maxNewTokenz": 3}})
    assert to_parameters({"method": "SAMPLE", "sampling": {"top_k": 5}}).sampling.top_k == 5
    with pytest.raises(TopsailError, match="cannot read the CA file .*missing.pem"):
        TgisClient("127.0.0.1:1", ca_file=tmp_path / "missing.pem")


def test_tls_with_a_ca_file(tmp_path) -> None:
    from pytest_topsail.sim.run.tls import make_certificates

    certificates = make_certificates()
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(certificates.ca_pem)

    async def scenario() -> None:
        server = grpc.aio.server()
        pb_grpc.add_GenerationServiceServicer_to_server(EchoServicer(), server)
        credentials = grpc.ssl_server_credentials([(certificates.key_pem, certificates.cert_pem)])
        port = server.add_secure_port("127.0.0.1:0", credentials)
        await server.start()
        try:
            async with TgisClient(f"localhost:{port}", ca_file=ca_file, timeout=10) as client:
                assert (await client.model_info()).max_sequence_length == 2048
            async with TgisClient(f"localhost:{port}", timeout=2, retries=0) as plaintext:
                with pytest.raises(grpc.aio.AioRpcError):
                    await plaintext.model_info()
        finally:
            await server.stop(None)

    asyncio.run(scenario())
