"""The simulator's Kubernetes REST API over HTTP (aiohttp): URL routing and verbs (server.py), watches, discovery and
OpenAPI documents, the protobuf and Table encodings, list options and the request metrics. It translates requests into
calls of the ``registry.Store`` and ``ApiError`` into ``kind: Status`` answers (never a traceback); streaming
subresources go to ``streams``. It may import every lower layer (machinery, storage, registry, node, streams); nothing
below imports it."""
