"""The streaming subresources of pods: exec (podexec.py) and port-forward (portforward.py) over the WebSocket
subprotocols kubectl and the official clients speak (streaming.py) and SPDY framing (spdy.py). It imports
``machinery``, ``node`` (nvidia-smi) and ``controllers`` (what a simulated container runs); the API server hands a
request to it once the pod and container are found."""
