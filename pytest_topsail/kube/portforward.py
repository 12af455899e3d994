"""A pod's port on a local 127.0.0.1 port, through the API server's ``pods/portforward`` (as ``kubectl port-forward``).

``with PortForward(kube, namespace, pod, 8033) as forward:`` then connect to ``forward.address``. Every local
connection opens its own tunnel (the official client's ``kubernetes.stream.portforward``) and two threads copy the
bytes. The tunnels use a connection of their own: the official client's stream functions swap the request method of
the ApiClient they are given while they connect, which must not disturb the caller's other requests.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.stream import portforward

from pytest_topsail.kube.client import Kube, KubeError

ACCEPT_POLL_S = 0.2
COPY_CHUNK = 65536
PROXY_THREAD = "Kubernetes port forward proxy"  # the name the official client gives its proxy thread


class QuietProxyErrors:
    """threading.excepthook: the official client's proxy thread writes to a local socket we closed when a tunnel
    ends (at the latest at session end); a BrokenPipeError/ConnectionResetError there is the tunnel closing, not a
    failure, so it prints no traceback. Every other exception of every thread goes to the hook installed before."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else ""
        if name.startswith(PROXY_THREAD) and isinstance(args.exc_value, (BrokenPipeError, ConnectionResetError)):
            return
        self.previous(args)


def _install_quiet_hook() -> None:
    if not isinstance(threading.excepthook, QuietProxyErrors):
        threading.excepthook = QuietProxyErrors(threading.excepthook)


class PortForward:
    """Local connections to ``address`` reach ``port`` of the pod ``namespace/pod``; ``close()`` stops accepting."""

    def __init__(self, kube: Kube, namespace: str, pod: str, port: int) -> None:
        self.namespace, self.pod, self.port = namespace, pod, port
        self._own = kube.with_pool(1)
        self._core = self._own.typed(k8s_client.CoreV1Api)
        self._connect_lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(ACCEPT_POLL_S)
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, name=f"port-forward {pod}:{port}", daemon=True)
        self._acceptor.start()
        _install_quiet_hook()

    def __enter__(self) -> PortForward:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                local, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            try:
                remote = self._tunnel()
            except Exception:  # noqa: BLE001 - the client sees its connection closed, as with kubectl
                local.close()
                continue
            for source, target in ((local, remote), (remote, local)):
                threading.Thread(target=_copy, args=(source, target), daemon=True).start()

    def _tunnel(self) -> Any:
        with self._connect_lock:
            try:
                forward = portforward(self._core.connect_get_namespaced_pod_portforward, self.pod, self.namespace,
                                      ports=str(self.port))
            except k8s_client.ApiException as error:
                raise KubeError(f"port-forward to pod {self.namespace}/{self.pod}:{self.port}: HTTP {error.status} "
                                f"{error.reason}", status=error.status or 0) from None
        return forward.socket(self.port)

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        self._acceptor.join(timeout=5)
        self._own.close()


def _copy(source: Any, target: Any) -> None:
    try:
        while data := source.recv(COPY_CHUNK):
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.close()
            except OSError:
                pass
