"""Fixtures of the LLM load suite: the served model of each case, reached over TGIS gRPC and OpenAI HTTP.

``tests.llm_load.serving`` says how the model is served:
- ``inferenceservice`` (default): a ServingRuntime and one InferenceService per model and server settings in the
  suite's namespace, on the cluster of the run (``cluster`` fixture). On the simulator, the predictor pod's reference
  server publishes its gRPC and HTTP addresses as ``sim.topsail.io/endpoint-<port>`` annotations, reached directly.
- ``in-process``: the reference server in this process (its own event loop in a thread), no cluster at all.
- ``endpoint``: an already served model at ``tests.llm_load.endpoint.http`` / ``.grpc`` (e.g. a port-forward to a
  real cluster's predictor).
"""

from __future__ import annotations

import hashlib
import json
import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import pytest_topsail as topsail
from pytest_topsail.tgis import ENV_OF_FIELD, pod_load_seconds

START_TIMEOUT_S = 30.0
ENDPOINT_ANNOTATION = "sim.topsail.io/endpoint-"
RUNTIME_NAME = "topsail-llm-runtime"
GRPC_PORT, HTTP_PORT = 8033, 8080
ISVC_LABEL = "serving.kserve.io/inferenceservice"
SERVER_ENV = ENV_OF_FIELD  # server settings of a case -> the TGIS container's environment


@dataclass(frozen=True)
class Endpoint:
    """Where one served model answers, the name it serves under, and what the KPI labels say about it."""

    http_url: str | None
    grpc_target: str | None
    served_model: str
    load_duration_s: float | None
    accelerator: str
    replicas: int = 1
    namespace: str = ""  # an InferenceService's: where its predictor pods run
    pods: tuple[str, ...] = ()  # the predictor pods serving it: a cluster fault of one fails the item


class ServedModels:
    """Models served on first use, one per (model, server settings, options), released at session end."""

    def __init__(self) -> None:
        self.served: dict[str, Endpoint] = {}
        self.threads: list[Any] = []
        self.faulted: set[str] = set()  # keys whose served pod a cluster fault ended: served again

    def endpoint(self, model: str, server: dict[str, Any], options: Any, request: pytest.FixtureRequest,
                 where: str) -> Endpoint:
        key = json.dumps([model, server, options.serving, options.gpu_profile, options.itl_factor], sort_keys=True)
        if key not in self.served:
            if options.serving == "in-process":
                self.served[key] = self.in_process(model, server, options, where, request)
            elif options.serving == "endpoint":
                self.served[key] = given_endpoint(model, options)
            else:
                self.served[key] = inference_service(model, server, options, request, key,
                                                     replaced=key in self.faulted)
        return self.served[key]

    def fault(self, endpoint: Endpoint, request: pytest.FixtureRequest) -> str | None:
        """The cluster fault (pytest_topsail.kube.faults: a lost GPU or node, an eviction, a preemption, an OOM
        kill) that ended a predictor pod of `endpoint`, as `<kind>: <message>`; the model is then served anew for
        the next item, by the pod its Deployment makes instead, when the cluster can."""
        if not endpoint.pods:
            return None
        from pytest_topsail.kube import faults_in

        found = faults_in(request.getfixturevalue("cluster").kube, endpoint.namespace)
        fault = next((found[pod] for pod in endpoint.pods if pod in found), None)
        if fault is None:
            return None
        keys = [key for key, served in self.served.items() if served is endpoint]
        for key in keys:
            del self.served[key]
        self.faulted.update(keys)
        return f"{fault.kind}: {fault.message}"

    def in_process(self, model: str, server: dict[str, Any], options: Any, where: str,
                   request: pytest.FixtureRequest) -> Endpoint:
        from pytest_topsail.tgis import ServerSettings, ServerThread, load_model_config, suite_catalog

        config = load_model_config(server, f"{where}: server")
        # checked at start-up (settings.py): a catalog model or one the suite declares
        served = suite_catalog(request.getfixturevalue("topsail_suite")).find(model)
        thread = ServerThread(ServerSettings(model_name=model, config=config, gpu_profile=options.gpu_profile,
                                             http_port=0, itl_factor=options.itl_factor, served=served),
                              start_timeout=START_TIMEOUT_S)
        running = thread.start()
        self.threads.append(thread)
        return Endpoint(http_url=f"http://127.0.0.1:{running.http_port}", grpc_target=running.address,
                        served_model=model, load_duration_s=None,  # no model is loaded in-process
                        accelerator=options.gpu_profile)

    def stop(self) -> None:
        for thread in self.threads:
            thread.stop()
        self.threads.clear()
        self.served.clear()


def given_endpoint(model: str, options: Any) -> Endpoint:
    http, grpc_target = options.endpoint.http, options.endpoint.grpc
    if not http and not grpc_target:
        raise topsail.TopsailError("tests.llm_load.serving is endpoint: give tests.llm_load.endpoint.http and/or .grpc")
    return Endpoint(http_url=http, grpc_target=grpc_target, served_model=options.endpoint.model or model,
                    load_duration_s=None, accelerator=options.gpu_profile)


def runtime_manifest(namespace: str, image: str) -> dict[str, Any]:
    """A vLLM-with-TGIS-adapter-like runtime: gRPC (fmaas) on 8033 and OpenAI HTTP on 8080."""
    return {
        "apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
        "metadata": {"name": RUNTIME_NAME, "namespace": namespace},
        "spec": {"supportedModelFormats": [{"name": "pytorch", "autoSelect": True}], "multiModel": False,
                 "containers": [{"name": "kserve-container", "image": image,
                                 "command": ["text-generation-launcher"],
                                 "args": ["--model-name=/mnt/models/", f"--grpc-port={GRPC_PORT}"],
                                 "ports": [{"containerPort": GRPC_PORT, "name": "h2c", "protocol": "TCP"},
                                           {"containerPort": HTTP_PORT, "name": "http1", "protocol": "TCP"}]}]},
    }


def isvc_name(model: str, key: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model.rsplit("/", 1)[-1].lower()).strip("-")[:40] or "model"
    return f"{slug}-{hashlib.sha1(key.encode()).hexdigest()[:6]}"


def isvc_manifest(name: str, namespace: str, model: str, server: dict[str, Any], options: Any
                  ) -> dict[str, Any]:
    env = [{"name": SERVER_ENV[key], "value": str(value)} for key, value in server.items() if key in SERVER_ENV]
    unknown = sorted(set(server) - set(SERVER_ENV))
    if unknown:
        raise topsail.TopsailError(f"case server settings {unknown} are not served through an InferenceService "
                           f"(known: {', '.join(SERVER_ENV)})")
    if options.itl_factor != 1.0:
        env.append({"name": "TOPSAIL_TGIS_ITL_FACTOR", "value": str(options.itl_factor)})
    return {
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
        "spec": {"predictor": {"model": {
            "modelFormat": {"name": "pytorch"}, "runtime": RUNTIME_NAME, "storageUri": f"s3://models/{model}",
            "env": env, "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}}},
    }


def inference_service(model: str, server: dict[str, Any], options: Any, request: pytest.FixtureRequest,
                      key: str, replaced: bool = False) -> Endpoint:
    """`replaced`: a cluster fault ended its predictor pod: wait for a pod serving again (the Deployment's new one)."""
    cluster = request.getfixturevalue("cluster")
    namespace = request.getfixturevalue("namespace")
    kube = cluster.kube
    kube.apply(runtime_manifest(namespace, options.runtime_image))
    manifest = isvc_manifest(isvc_name(model, key), namespace, model, server, options)
    kube.apply(manifest)
    wait_serving(kube, manifest, options.serving_timeout_s)

    def live_pods() -> list[dict[str, Any]]:
        listed = kube.list("v1", "Pod", namespace=namespace,
                           label_selector=f"{ISVC_LABEL}={manifest['metadata']['name']}")
        return [p for p in listed if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Failed", "Succeeded")]

    if replaced:
        from pytest_topsail.kube import poll

        poll(live_pods, lambda pods: any(f"{ENDPOINT_ANNOTATION}{GRPC_PORT}" in (p["metadata"].get("annotations")
                                                                               or {}) for p in pods),
             what=f"a predictor pod of InferenceService {namespace}/{manifest['metadata']['name']} serving again",
             timeout=options.serving_timeout_s, interval=0.5)
    pods = live_pods()
    loads = [seconds for seconds in map(pod_load_seconds, pods) if seconds is not None]
    load_duration = max(loads) if loads else None  # the cluster's time, never the client's (tgis/load_time.py)
    annotations = next((p["metadata"].get("annotations") or {} for p in pods
                        if f"{ENDPOINT_ANNOTATION}{GRPC_PORT}" in (p["metadata"].get("annotations") or {})), None)
    if annotations is None:
        raise topsail.TopsailError(
            f"InferenceService {namespace}/{manifest['metadata']['name']} is Ready but no predictor pod publishes "
            f"{ENDPOINT_ANNOTATION}{GRPC_PORT} (a real cluster: use tests.llm_load.serving: endpoint with a "
            "port-forward)")
    http = annotations.get(f"{ENDPOINT_ANNOTATION}{HTTP_PORT}")
    http_url = f"http://{http}" if http else None
    node = kube.get(topsail.ObjectRef("v1", "Node", (pods[0].get("spec") or {}).get("nodeName") or "-"))
    accelerator = ((node or {}).get("metadata", {}).get("labels") or {}).get("nvidia.com/gpu.product", "none")
    return Endpoint(http_url=http_url, grpc_target=annotations[f"{ENDPOINT_ANNOTATION}{GRPC_PORT}"],
                    served_model=served_model_name(http_url) or model, load_duration_s=load_duration,
                    accelerator=accelerator, replicas=len(pods), namespace=namespace,
                    pods=tuple(p["metadata"]["name"] for p in pods))


def wait_serving(kube: topsail.Kube, manifest: dict[str, Any], timeout: float) -> None:
    """The InferenceService Ready; a predictor pod that no node can ever hold (no node at all, too big a request)
    ends the wait at once naming why (kube.scheduling), instead of waiting for the timeout."""
    from pytest_topsail.kube import never_schedulable

    ref = topsail.ObjectRef.of(manifest)
    selector = f"{ISVC_LABEL}={manifest['metadata']['name']}"

    def ready(isvc: dict[str, Any] | None) -> bool:
        if topsail.condition_status(isvc, "Ready") == "True":
            return True
        nodes = kube.list("v1", "Node")
        pods = kube.list("v1", "Pod", namespace=ref.namespace, label_selector=selector)
        for pod in pods if nodes else [None]:
            scheduled = topsail.find_condition(pod, "PodScheduled") or {}
            if pod is not None and scheduled.get("status") != "False":
                continue
            why = never_schedulable(pod or {}, nodes, scheduled.get("message", ""))
            if why:
                raise topsail.TopsailError(f"InferenceService {ref.namespace}/{ref.name}: no node can ever hold its "
                                           f"predictor: {why}")
        return False

    topsail.wait_for(kube, ref, ready, what="to have condition Ready=True", timeout=timeout, interval=1.0)


def served_model_name(http_url: str | None) -> str | None:
    """The model id the OpenAI front serves under (KServe names it after the storage path)."""
    if not http_url:
        return None
    with urllib.request.urlopen(f"{http_url}/v1/models", timeout=10) as response:
        return json.loads(response.read())["data"][0]["id"]


@pytest.fixture(scope="session")
def llm_models() -> Iterator[ServedModels]:
    models = ServedModels()
    yield models
    models.stop()


@pytest.fixture
def llm_settings(topsail_suite: topsail.Suite) -> Any:
    """``tests.llm_load`` validated (settings.py)."""
    return topsail_suite.settings("tests.llm_load")


@pytest.fixture
def llm_endpoint(llm_models: ServedModels, case: topsail.Case, llm_settings: Any,
                 request: pytest.FixtureRequest) -> Endpoint:
    """The served model of this item's case (served once per model and server settings)."""
    try:
        options = llm_settings
        return llm_models.endpoint(case.settings["model"], case.settings.get("server") or {}, options, request,
                                   case.source or case.id)
    except topsail.TopsailError as error:
        message = str(error)
    pytest.fail(message, pytrace=False)  # outside the except: one message, no 'During handling of ...'

