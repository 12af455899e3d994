"""KServe on the simulated cluster: TGIS ServingRuntime + RawDeployment InferenceService applied with kubectl, the
predictor reached through kubectl port-forward and kubernetes.stream.portforward with our TGIS client."""

from __future__ import annotations

import asyncio
import queue
import shutil
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from kubernetes import client
from kubernetes.stream import portforward

from pytest_topsail.tgis.client import TgisClient

pytestmark = [
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
    pytest.mark.xdist_group("sim_kserve"),  # -n N: the module-scoped simulator once
]
WAIT = 30.0

RUNTIME = """
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: tgis-runtime
spec:
  multiModel: false
  supportedModelFormats:
  - {name: pytorch, autoSelect: true}
  containers:
  - name: kserve-container
    image: quay.io/opendatahub/text-generation-inference:stable
    command: [text-generation-launcher]
    args: [--model-name=/mnt/models/, --port=3000, --grpc-port=8033]
    env:
    - {name: TRANSFORMERS_CACHE, value: /tmp/transformers_cache}
    readinessProbe:
      httpGet: {path: /health, port: 3000}
    ports:
    - {containerPort: 8033, name: h2c, protocol: TCP}
"""

ISVC = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {name}
  annotations:
    serving.kserve.io/deploymentMode: RawDeployment
{extra}
spec:
  predictor:
    model:
      modelFormat: {{name: pytorch}}
      runtime: {runtime}
      storageUri: {uri}
      resources:
        requests: {{nvidia.com/gpu: "1"}}
        limits: {{nvidia.com/gpu: "1"}}
"""


def isvc(name: str, uri: str, runtime: str = "tgis-runtime", extra: str = "") -> str:
    return ISVC.format(name=name, uri=uri, runtime=runtime, extra=extra)


@pytest.fixture(scope="module")
def sim(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    profile = {"seed": 5, "node_pools": [{"name": "gpu", "count": 2, "gpu_profile": "a100"}]}
    yield from start_sim(tmp_path_factory, "kserve-sim", profile=profile)


@pytest.fixture(scope="module")
def core(sim: Any) -> client.CoreV1Api:
    return client.CoreV1Api(sim.api_client())


@pytest.fixture(scope="module")
def flan(sim: Any) -> str:
    """A Ready RawDeployment InferenceService serving flan-t5-small; the name of its predictor pod."""
    sim.kubectl("apply", "-f", "-", stdin=RUNTIME + "---" + isvc("flan", "s3://models/google/flan-t5-small"))
    sim.kubectl("wait", "--for=condition=Ready", "isvc/flan", f"--timeout={WAIT:.0f}s")
    return sim.kubectl("get", "pods", "-l", "serving.kserve.io/inferenceservice=flan", "-o",
                       "jsonpath={.items[0].metadata.name}").stdout


def _status(sim: Any, name: str) -> dict[str, Any]:
    custom = client.CustomObjectsApi(sim.api_client())
    return custom.get_namespaced_custom_object("serving.kserve.io", "v1beta1", "default", "inferenceservices",
                                               name).get("status") or {}


async def _tgis_calls(target: str) -> dict[str, Any]:
    """What a user's smoke test does through a forwarded port: each RPC once, and one invalid request."""
    async with TgisClient(target, model_id="flan-t5-small") as tgis:
        generated = await tgis.generate(["Hello world"], {"stopping": {"minNewTokens": 10, "maxNewTokens": 10}})
        streamed = [m async for m in tgis.generate_stream("Hello world", {"stopping": {"maxNewTokens": 4}})]
        tokens = await tgis.tokenize(["Hello world"], return_tokens=True)
        info = await tgis.model_info()
        with pytest.raises(grpc.aio.AioRpcError) as invalid:
            await tgis.generate(["x"], {"method": "SAMPLE", "sampling": {"topP": 2.0}})
    return {"generated": generated.responses[0], "streamed": streamed, "tokens": list(tokens.responses[0].tokens),
            "info": info, "invalid": invalid.value}


def _check_calls(calls: dict[str, Any]) -> None:
    assert calls["generated"].generated_token_count == 10 and calls["generated"].text
    assert calls["streamed"][-1].generated_token_count == 4
    assert "".join(m.text for m in calls["streamed"]).strip()
    assert calls["tokens"] == ["▁Hello", "▁world"]
    assert calls["info"].max_sequence_length > 0
    assert calls["invalid"].code() == grpc.StatusCode.INVALID_ARGUMENT
    assert calls["invalid"].details() == "top_p must be > 0.0 and <= 1.0"


def test_kserve_kinds_are_served_when_kserve_is_preinstalled(sim: Any) -> None:
    resources = sim.kubectl("api-resources", "--api-group=serving.kserve.io", "-o", "name").stdout.split()
    assert sorted(resources) == [f"{plural}.serving.kserve.io" for plural in (
        "clusterservingruntimes", "clusterstoragecontainers", "inferencegraphs", "inferenceservices",
        "servingruntimes", "trainedmodels")]


def test_ready_inferenceservice_status_and_predictor(sim: Any, core: client.CoreV1Api, flan: str) -> None:
    status = _status(sim, "flan")
    assert status["modelStatus"]["states"] == {"activeModelState": "Loaded", "targetModelState": "Loaded"}
    assert status["url"] == "http://flan-predictor.default.svc.cluster.local"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "IngressReady": "True", "PredictorReady": "True", "Ready": "True"}
    pod = core.read_namespaced_pod(flan, "default")
    container = pod.spec.containers[0]
    assert container.resources.limits["nvidia.com/gpu"] == "1"
    assert pod.spec.init_containers[0].name == "storage-initializer"
    assert core.read_namespaced_service("flan-predictor", "default").spec.ports[0].port == 8033
    assert pod.metadata.annotations["sim.topsail.io/endpoint-8033"].startswith("127.0.0.1:")
    health = urllib.request.urlopen(f"http://{pod.metadata.annotations['sim.topsail.io/endpoint-3000']}/health",
                                    timeout=WAIT)  # TGIS's --port=3000 (the runtime's readiness probe)
    assert health.status == 200


@pytest.mark.parametrize("target", ["pod", "svc/flan-predictor"])
def test_kubectl_port_forward_to_the_predictor(sim: Any, flan: str, target: str) -> None:
    where = f"pod/{flan}" if target == "pod" else target  # kubectl picks a pod of the Service itself
    process = subprocess.Popen(["kubectl", "--kubeconfig", str(sim.kubeconfig_path), "port-forward", where,
                                ":8033"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
        forwarding = lines.get(timeout=WAIT)  # kubectl picks the local port: "Forwarding from 127.0.0.1:L -> 8033"
        assert forwarding.startswith("Forwarding from 127.0.0.1:") and forwarding.rstrip().endswith(" -> 8033")
        local = int(forwarding.split("127.0.0.1:", 1)[1].split(" ", 1)[0])
        _check_calls(asyncio.run(asyncio.wait_for(_tgis_calls(f"127.0.0.1:{local}"), WAIT)))
    finally:
        process.terminate()
        process.communicate(timeout=WAIT)


class _Bridge:
    """A local TCP port whose every connection is forwarded by `kubernetes.stream.portforward` to the pod's port."""

    def __init__(self, core: client.CoreV1Api, pod: str, port: int) -> None:
        self.core, self.pod, self.port = core, pod, port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.stopped = threading.Event()
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                local, _ = self.listener.accept()
            except TimeoutError:
                continue
            forward = portforward(self.core.connect_get_namespaced_pod_portforward, self.pod, "default",
                                  ports=str(self.port))
            remote = forward.socket(self.port)
            for source, target in ((local, remote), (remote, local)):
                threading.Thread(target=self._copy, args=(source, target), daemon=True).start()

    def _copy(self, source: Any, target: Any) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                sock.close()

    def close(self) -> None:
        self.stopped.set()
        self.acceptor.join(WAIT)
        self.listener.close()


def test_official_client_portforward_to_the_predictor(core: client.CoreV1Api, flan: str) -> None:
    bridge = _Bridge(core, flan, 8033)
    try:
        _check_calls(asyncio.run(asyncio.wait_for(_tgis_calls(bridge.address), WAIT)))
    finally:
        bridge.close()


def test_model_that_does_not_fit_reports_failed_to_load(sim: Any, flan: str, wait_until: Any) -> None:
    fast = ('    sim.topsail.io/initialize-delay-ms: "100"\n'
            '    sim.topsail.io/duration-seconds: "0.5"')  # download and crash quickly
    sim.kubectl("apply", "-f", "-", stdin=isvc("huge", "s3://models/meta-llama/Llama-2-70b-hf", extra=fast))
    status = wait_until(lambda: (s := _status(sim, "huge")).get("modelStatus", {}).get("states", {}).get(
        "targetModelState") == "FailedToLoad" and s, WAIT, "huge to report FailedToLoad")
    failure = status["modelStatus"]["lastFailureInfo"]
    assert failure["reason"] == "ModelLoadFailed"
    assert "Llama-2-70b-hf (69B parameters, float16) needs" in failure["message"]  # the model catalog's size
    assert "more than one NVIDIA A100-SXM4-40GB GPU" in failure["message"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"
    waited = sim.kubectl("wait", "--for=condition=Ready", "isvc/huge", "--timeout=1s", check=False)
    assert waited.returncode != 0


def test_unknown_runtime_is_reported(sim: Any, flan: str, wait_until: Any) -> None:
    sim.kubectl("apply", "-f", "-", stdin=isvc("orphan", "s3://models/gpt2", runtime="nope"))
    status = wait_until(lambda: _status(sim, "orphan").get("modelStatus"), WAIT, "orphan's model status")
    assert status["lastFailureInfo"]["reason"] == "RuntimeNotRecognized"
    assert status["lastFailureInfo"]["message"] == "No ServingRuntimes or ClusterServingRuntimes with the name: nope"
    sim.kubectl("apply", "-f", "-", stdin=RUNTIME.replace("name: tgis-runtime", "name: nope"))
    sim.kubectl("wait", "--for=condition=Ready", "isvc/orphan", f"--timeout={WAIT:.0f}s")  # the runtime arrived


def _refused(address: str) -> bool:
    """Nothing listens at `address` any more."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        pass  # e.g. reset while the server stops
    return False


def test_plain_tgis_pod_serves_until_deleted(sim: Any, core: client.CoreV1Api, wait_until: Any) -> None:
    core.create_namespaced_pod("default", {
        "metadata": {"name": "tgis"},
        "spec": {"containers": [{
            "name": "server", "image": "quay.io/opendatahub/text-generation-inference:stable",
            "env": [{"name": "MODEL_NAME", "value": "bigscience/bloom-560m"}, {"name": "MAX_NEW_TOKENS", "value": "77"},
                    {"name": "GRPC_PORT", "value": "8033"}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}})
    annotations = wait_until(lambda: (core.read_namespaced_pod("tgis", "default").metadata.annotations or {}).get(
        "sim.topsail.io/endpoint-8033"), WAIT, "the plain TGIS pod's endpoint")

    async def info() -> Any:
        async with TgisClient(annotations, model_id="bigscience/bloom-560m") as tgis:
            return await tgis.model_info(timeout=30)

    assert asyncio.run(info()).max_new_tokens == 77  # from the pod's env
    timing = core.read_namespaced_pod("tgis", "default").metadata.annotations
    load = float(timing["sim.topsail.io/model-load-seconds"])  # simulated: the latency model's 2 s + weights
    assert load > 2  # waited on the default time scale (0.02), reported in simulated seconds
    assert float(timing["sim.topsail.io/ready-delay-ms"]) == pytest.approx(load * 0.02 * 1000, abs=2)
    core.delete_namespaced_pod("tgis", "default", grace_period_seconds=0)
    wait_until(lambda: _refused(annotations), WAIT, "the model server of the deleted pod to stop")


VLLM_RUNTIME = """
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: vllm-runtime
spec:
  supportedModelFormats:
  - {name: vLLM, autoSelect: true}
  containers:
  - name: kserve-container
    image: quay.io/modh/vllm:stable
    args: [--port=8080, --model=/mnt/models]
    ports:
    - {containerPort: 8080, name: http1, protocol: TCP}
    - {containerPort: 8033, name: h2c, protocol: TCP}
"""


def _endpoints(core: client.CoreV1Api, isvc_name: str) -> list[dict[str, str]]:
    pods = core.list_namespaced_pod("default", label_selector=f"serving.kserve.io/inferenceservice={isvc_name}")
    return [pod.metadata.annotations for pod in pods.items if pod.metadata.deletion_timestamp is None]


def test_http_port_serves_the_openai_front(sim: Any, core: client.CoreV1Api, wait_until: Any) -> None:
    import requests

    manifest = VLLM_RUNTIME + "---" + isvc("chat", "s3://models/gpt2", runtime="vllm-runtime")
    sim.kubectl("apply", "-f", "-", stdin=manifest)
    sim.kubectl("wait", "--for=condition=Ready", "isvc/chat", f"--timeout={WAIT:.0f}s")
    annotations = _endpoints(core, "chat")[0]
    models = requests.get(f"http://{annotations['sim.topsail.io/endpoint-8080']}/v1/models", timeout=WAIT).json()
    assert [model["id"] for model in models["data"]] == ["gpt2"]
    assert annotations["sim.topsail.io/endpoint-8033"] != annotations["sim.topsail.io/endpoint-8080"]


def test_changed_inferenceservice_rolls_its_predictor(sim: Any, core: client.CoreV1Api, flan: str,
                                                      wait_until: Any) -> None:
    changed = isvc("flan", "s3://models/google/flan-t5-small").replace(
        "      resources:", "      env:\n      - {name: MAX_NEW_TOKENS, value: \"33\"}\n      resources:")
    sim.kubectl("apply", "-f", "-", stdin=changed)

    async def max_new_tokens(address: str) -> int:
        async with TgisClient(address, model_id="flan-t5-small") as tgis:
            return (await tgis.model_info(timeout=30)).max_new_tokens

    def rolled() -> bool:
        endpoints = [a.get("sim.topsail.io/endpoint-8033") for a in _endpoints(core, "flan")]
        return len(endpoints) == 1 and endpoints[0] is not None and \
            asyncio.run(max_new_tokens(endpoints[0])) == 33

    wait_until(rolled, WAIT, "the predictor to serve the changed config alone")
    assert _status(sim, "flan")["modelStatus"]["states"]["activeModelState"] == "Loaded"


def test_pod_environment_makes_a_server_diverge(sim: Any, core: client.CoreV1Api, flan: str,
                                                wait_until: Any) -> None:
    odd = isvc("odd", "s3://models/google/flan-t5-small").replace(
        "      resources:", "      env:\n      - {name: TOPSAIL_TGIS_DIVERGE, value: \"1\"}\n      resources:")
    sim.kubectl("apply", "-f", "-", stdin=odd)
    sim.kubectl("wait", "--for=condition=Ready", "isvc/odd", f"--timeout={WAIT:.0f}s")

    async def text(address: str) -> str:
        async with TgisClient(address, model_id="flan-t5-small") as tgis:
            reply = await tgis.generate(["Hello world"], {"stopping": {"minNewTokens": 20, "maxNewTokens": 20}})
            return reply.responses[0].text

    odd_address = _endpoints(core, "odd")[0]["sim.topsail.io/endpoint-8033"]
    odd_text = asyncio.run(text(odd_address))
    flan_text = asyncio.run(text(_endpoints(core, "flan")[0]["sim.topsail.io/endpoint-8033"]))
    assert odd_text and flan_text and odd_text != flan_text
    sim.kubectl("delete", "isvc", "odd")  # its Deployment, pods and model server go with it
    wait_until(lambda: not _endpoints(core, "odd") and _refused(odd_address), WAIT, "odd's model server to stop")



def test_plain_tgis_pod_with_a_model_that_does_not_fit_crashes(sim: Any, core: client.CoreV1Api,
                                                               wait_until: Any) -> None:
    core.create_namespaced_pod("default", {
        "metadata": {"name": "tgis-big", "annotations": {"sim.topsail.io/duration-seconds": "0.3"}},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "server", "image": "quay.io/opendatahub/text-generation-inference:stable",
            "env": [{"name": "MODEL_NAME", "value": "meta-llama/Llama-2-70b-hf"}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}})
    wait_until(lambda: core.read_namespaced_pod("tgis-big", "default").status.phase == "Failed", WAIT,
               "the pod whose model does not fit to fail")
    log = core.read_namespaced_pod_log("tgis-big", "default")
    assert "torch.cuda.OutOfMemoryError" in log and "Llama-2-70b-hf (69B parameters, float16) needs" in log
    pod = core.read_namespaced_pod("tgis-big", "default")
    assert not any(key.startswith("sim.topsail.io/endpoint-") for key in pod.metadata.annotations)
