"""TGIS serving: the `fmaas` gRPC protocol, an asyncio client, tgis-tester's ModelConfig and a reference server.

Modules: generation.proto and its generated stubs (generation_pb2*), client (TgisClient), model_config (ModelConfig),
tokenizer and toymodel (the deterministic stand-in model), validation (TGIS's request checks), latency (the latency
model, pure logic), catalog (the models the simulated servers can size), sizing (does a model fit a GPU, how long
it loads), serving (ModelServer: admission, batching and decoding without any transport), server (the gRPC server),
openai_http (the OpenAI-compatible HTTP front).
docs/tgis.md describes them.
Nothing here is imported by the plugin at start-up: importing grpc costs time only for suites that serve TGIS.
"""

import os

# gRPC core logs a normal end of a channel at INFO on stderr, into pytest's output (a GOAWAY when a worker's server
# stops: Ctrl-C, a worker removed); errors only, unless the user chose a verbosity. Before any module here imports grpc.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
