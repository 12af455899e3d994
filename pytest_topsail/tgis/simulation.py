"""KServe (serving.kserve.io), simulated as on OpenShift AI with KServe installed, and the TGIS model servers behind
simulated pods: a simulator controller plugin owned by the TGIS package, registered in pyproject.toml under the
entry-point group `pytest_topsail.sim_controllers` (the simulator itself knows nothing of TGIS).

The ServingRuntime (v1alpha1) and InferenceService (v1beta1, short name `isvc`) kinds are served while OpenShift AI's
kserve component is (the simulator's rhoai controller registers them: Managed in the DataScienceCluster, or
preinstalled by the profile); this controller looks them up when it needs them. For each InferenceService
(RawDeployment; a Serverless one is simulated the same way) it picks the ServingRuntime (`spec.predictor.model.runtime`,
else one whose `supportedModelFormats` auto-selects the model format) and creates
the Deployment and Service `<isvc>-predictor`: the runtime's containers with the predictor's args, env and resources
(GPUs), a storage-initializer init container for `storageUri`, pods labelled
`serving.kserve.io/inferenceservice=<name>` that carry the InferenceService's own `sim.topsail.io/*` annotations
(a new generation of the InferenceService replaces the pod template).
The model (the last part of `storageUri`) and its ModelConfig (from the container's TGIS args and env:
`--dtype-str`/DTYPE_STR, `--num-shard`/NUM_SHARD, MAX_BATCH_SIZE, ...; GPUs from the `nvidia.com/gpu` limit) time
the pod: initialize = storage download of the weights (their size follows dtype and GPTQ quantization,
pytest_topsail.tgis.sizing.weights_gb) at `storage_gbps`, ready = model load (sizing.load_seconds on the cluster's
GPU profile). Both run on the profile's time scale (`plugins.kserve.time_scale`, default 0.02: a minute of download
passes in 1.2 s) while the times reported stay simulated: the pod's `sim.topsail.io/model-download-seconds` and
`model-load-seconds` (what pytest_topsail.tgis.load_time reads) and the ModelLoaded event. Serving (prefill and
decode) runs on `plugins.kserve.serving_time_scale` (default 1: real time); below 1 the server returns in each
call's trailing metadata the simulated time its client did not wait, which pytest_topsail.tgis.client counts so a
latency stays in simulated time (the TGIS suite's `request_latency_ms`). A model that does not
fit the GPU memory crashes its container after the (scaled) load time with the reason in its log, and the
InferenceService reports `modelStatus` FailedToLoad with that reason.

A plain pod whose container runs `text-generation-launcher` or an image named text-generation-inference
(tgis-tester's way, model from MODEL_NAME) gets the same load time and fit annotations as soon as it exists.
Every ready pod that serves TGIS — a predictor pod or such a plain pod — gets a reference TGIS
server (pytest_topsail.tgis.server; TOPSAIL_TGIS_DIVERGE and TOPSAIL_TGIS_PREFIXES in the container's environment
make it diverge or know prefix ids) on 127.0.0.1, in the simulator's process, stopped when the pod goes; its address
is published on the pod as `sim.topsail.io/endpoint-<grpc port>` (what pods/portforward connects to); a container
port named `http1`/`http` (else `--port`) gets the server's HTTP front (OpenAI routes, /health), published the same
way. Then the
InferenceService becomes Ready: `modelStatus` Loaded, conditions PredictorReady/IngressReady/Ready, `status.url`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Hashable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_topsail.errors import TopsailError
from pytest_topsail.hardware import profile_of_label
from pytest_topsail.sim.controllers.base import Controller, condition, now_seconds, set_condition
from pytest_topsail.sim.controllers.containers import ANNOTATION_PREFIX, ENDPOINT_ANNOTATION
from pytest_topsail.sim.controllers.workload import owner_reference
from pytest_topsail.sim.machinery.apierror import ApiError
from pytest_topsail.sim.node.gpuactivity import Live, Usage, gpu_activity
from pytest_topsail.sim.registry.patch import MERGE_PATCH
from pytest_topsail.tgis.catalog import Catalog, ServedModel, catalog

log = logging.getLogger(__name__)

GROUP = "serving.kserve.io"
ISVC_LABEL = f"{GROUP}/inferenceservice"
MODEL_ANNOTATION = ANNOTATION_PREFIX + "model-name"
FAILURE_ANNOTATION = ANNOTATION_PREFIX + "model-load-failure"
GENERATION_ANNOTATION = ANNOTATION_PREFIX + "inferenceservice-generation"
DEFAULT_GRPC_PORT = 8033
DOWNLOAD_SECONDS_ANNOTATION = ANNOTATION_PREFIX + "model-download-seconds"
LOAD_SECONDS_ANNOTATION = ANNOTATION_PREFIX + "model-load-seconds"
SOURCE = "kserve-controller"
_SERVED_PORTS = ("port", "grpc_port")  # the container's ports say where it serves, not its config


# ----------------------------------------------------------------- what a TGIS container asks for
def _args(container: dict[str, Any]) -> dict[str, str]:
    """`--name=value` and `--name value` options of the container's command and args."""
    words = [str(w) for w in [*(container.get("command") or ()), *(container.get("args") or ())]]
    options: dict[str, str] = {}
    for index, word in enumerate(words):
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            if not equals and index + 1 < len(words) and not words[index + 1].startswith("--"):
                value = words[index + 1]
            options[name.replace("_", "-")] = value
    return options


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value")) for e in container.get("env") or () if "value" in e}


def serves_tgis(container: dict[str, Any]) -> bool:
    words = " ".join(str(w) for w in [*(container.get("command") or ()), *(container.get("args") or ())])
    return "text-generation-launcher" in words or "text-generation-inference" in str(container.get("image") or "")


def model_config(container: dict[str, Any]) -> Any:
    """The tgis ModelConfig the container's args, env and GPU limit describe; ValueError naming the problem."""
    from pytest_topsail.tgis.model_config import ENV_OF_FIELD, load_model_config

    options, env = _args(container), _env(container)
    data: dict[str, Any] = {}
    for field_name, variable in ENV_OF_FIELD.items():
        value = options.get(field_name.replace("_", "-"), env.get(variable))
        if value not in (None, "") and field_name not in _SERVED_PORTS:
            data[field_name] = value.lower() == "true" if field_name in ("flash_attention", "pt2_compile") else value
    limits = (container.get("resources") or {}).get("limits") or {}
    gpus = int(float(str(limits.get("nvidia.com/gpu", "0")) or 0))
    data["resources"] = {"gpu": gpus or None}
    if not gpus:
        data.setdefault("dtype_str", "float32")
    try:
        return load_model_config(data, f"container {container.get('name')}")
    except TopsailError as error:
        raise ValueError(str(error)) from None


def grpc_port(container: dict[str, Any]) -> int:
    for port in container.get("ports") or ():
        if port.get("name") in ("h2c", "grpc") and port.get("containerPort"):
            return int(port["containerPort"])
    options, env = _args(container), _env(container)
    value = options.get("grpc-port") or env.get("GRPC_PORT")
    return int(value) if value and value.isdigit() else DEFAULT_GRPC_PORT


def http_port(container: dict[str, Any]) -> int | None:
    """The container's HTTP port, served by the reference server's HTTP front (OpenAI routes and /health): the port
    KServe names `http1` (as vLLM runtimes declare it), else the launcher's `--port` (TGIS's /health port)."""
    for port in container.get("ports") or ():
        if port.get("name") in ("http1", "http") and port.get("containerPort"):
            return int(port["containerPort"])
    value = _args(container).get("port", "")
    return int(value) if value.isdigit() else None


def model_name(isvc: dict[str, Any]) -> str:
    uri = str((((isvc.get("spec") or {}).get("predictor") or {}).get("model") or {}).get("storageUri") or "")
    tail = uri.rstrip("/").rsplit("/", 1)[-1] if "/" in uri else ""
    return tail or isvc["metadata"]["name"]


class KServeSimSettings(BaseModel):
    """The profile's ``plugins.kserve``: how fast simulated model servers start."""

    model_config = ConfigDict(extra="forbid", strict=True)

    time_scale: float = Field(0.02, gt=0, le=1)  # real seconds per simulated second of model download and load
    # real seconds per simulated second of serving (prefill, decode); the TGIS client adds back what it took off
    serving_time_scale: float = Field(1.0, gt=0, le=1)
    storage_gbps: float = Field(1.0, gt=0)  # the storage-initializer's simulated download speed (GB/s)
    # models the catalog (pytest_topsail/tgis/catalog.yaml) does not list: name -> {params_billions, ...}
    models: dict[str, ServedModel] = Field(default_factory=dict)

    def catalog(self) -> Catalog:
        return catalog(self.models)


def model_annotations(container: dict[str, Any], model: str, gpu_profile: str, download: bool,
                      settings: KServeSimSettings | None = None) -> dict[str, str]:
    """The pod annotations that time a model server's start (download, load; scaled by ``settings.time_scale``, the
    simulated seconds beside them) or make it fail to load (the model does not fit: exit 1 after the load time, the
    reason in its log; so does a model the catalog does not list: it cannot be sized); ValueError for an invalid
    config."""
    from pytest_topsail.tgis.sizing import check_fit, download_gb, load_seconds

    settings = settings or KServeSimSettings()
    scale = settings.time_scale
    config = model_config(container)
    known = settings.catalog()
    served = known.find(model)
    if served is None:
        reason = known.unknown(model)
        return {MODEL_ANNOTATION: model, FAILURE_ANNOTATION: reason, ANNOTATION_PREFIX + "exit-code": "1",
                ANNOTATION_PREFIX + "duration-seconds": "0.1", ANNOTATION_PREFIX + "log": f"ValueError: {reason}"}
    profile = gpu_profile if config.resources.gpu_count else "none"
    fit = check_fit(config, profile, model, served)
    load = load_seconds(config, profile, model, served)
    fetch = download_gb(model, served) / settings.storage_gbps if download else 0.0
    annotations = {MODEL_ANNOTATION: model, ANNOTATION_PREFIX + "ready-delay-ms": f"{load * scale * 1000:.0f}",
                   LOAD_SECONDS_ANNOTATION: f"{load:.1f}"}
    if download:
        annotations[ANNOTATION_PREFIX + "initialize-delay-ms"] = f"{fetch * scale * 1000:.0f}"
        annotations[DOWNLOAD_SECONDS_ANNOTATION] = f"{fetch:.1f}"
    if not fit.fits:
        del annotations[ANNOTATION_PREFIX + "ready-delay-ms"]
        annotations.update({FAILURE_ANNOTATION: fit.reason, ANNOTATION_PREFIX + "exit-code": "1",
                            ANNOTATION_PREFIX + "duration-seconds": f"{max(load * scale, 0.1):.3f}",
                            ANNOTATION_PREFIX + "log": f"torch.cuda.OutOfMemoryError: CUDA out of memory: "
                                                       f"{fit.reason}"})
    return annotations


# ----------------------------------------------------------------- the controller
class KServeController(Controller):
    name = "kserve"
    settings_model = KServeSimSettings

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pods = self.store.resource_type("pods")
        self.nodes = self.store.resource_type("nodes")
        self.deployments = self.store.resource_type("deployments", "apps")
        self.services = self.store.resource_type("services")
        self.servers: dict[str, Any] = {}  # pod uid -> tgis RunningServer

    @property
    def _timing(self) -> KServeSimSettings:
        return self.settings if isinstance(self.settings, KServeSimSettings) else KServeSimSettings()

    # KServe's kinds are served only while OpenShift AI's kserve component is (the simulator's rhoai controller:
    # Managed in the DataScienceCluster, or preinstalled by the profile): looked up when needed, a 404 ApiError
    # while not served (which ends a reconcile quietly)
    @property
    def isvcs(self) -> Any:
        return self.store.resource_type("inferenceservices", GROUP)

    @property
    def runtimes(self) -> Any:
        return self.store.resource_type("servingruntimes", GROUP)

    def _served_isvcs(self, namespace: str | None = None) -> list[dict[str, Any]]:
        try:
            return self.store.list(self.isvcs, namespace)
        except ApiError:
            return []

    async def on_start(self) -> None:
        self.watch_key((GROUP, "inferenceservices"), self._on_isvc)
        self.watch_key((GROUP, "servingruntimes"), self._on_runtime)
        self.watch("pods", "", self._on_pod)
        for isvc in self._served_isvcs():
            self._on_isvc("ADDED", isvc)
        for pod in self.store.list(self.pods):
            self._on_pod("ADDED", pod)

    async def stop(self) -> None:
        await super().stop()
        for server in list(self.servers.values()):
            await server.stop(0)
        self.servers.clear()

    def _on_isvc(self, event_type: str, isvc: dict[str, Any]) -> None:
        if event_type != "DELETED":
            self.enqueue(("isvc", isvc["metadata"].get("namespace") or "", isvc["metadata"]["name"]))

    def _on_runtime(self, event_type: str, runtime: dict[str, Any]) -> None:
        namespace = runtime["metadata"].get("namespace") or ""
        for isvc in self._served_isvcs(namespace):  # e.g. one that waited for this runtime
            self._on_isvc("MODIFIED", isvc)

    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        isvc = (metadata.get("labels") or {}).get(ISVC_LABEL)
        if isvc is None and not any(serves_tgis(c) for c in (pod.get("spec") or {}).get("containers") or ()):
            return
        namespace = metadata.get("namespace") or ""
        self.enqueue(("pod", namespace, metadata["name"], metadata["uid"], event_type == "DELETED"))
        if isvc:
            self.enqueue(("isvc", namespace, isvc))

    async def reconcile(self, key: Hashable) -> None:
        parts: tuple[Any, ...] = key  # type: ignore[assignment]
        if parts[0] == "pod":
            await self._reconcile_pod(parts[1], parts[2], parts[3], parts[4])
        else:
            self._reconcile_isvc(parts[1], parts[2])

    # ------------------------------------------------------------- pods: the model servers
    async def _reconcile_pod(self, namespace: str, name: str, uid: str, deleted: bool) -> None:
        pod = None if deleted else self.store.find(self.pods, namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid or (pod.get("status") or {}).get("phase") in (
                "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
            server = self.servers.pop(uid, None)
            if server is not None:
                await server.stop(0)
            return
        annotations = pod["metadata"].get("annotations") or {}
        containers = pod["spec"]["containers"]
        container = next((c for c in containers if serves_tgis(c)), containers[0])
        # here: pytest imports this module to check settings, and podexec's aiohttp (0.15 s of every run's CPU)
        # serves the simulator only
        from pytest_topsail.sim.streams.podexec import environment

        env = environment(self.store, pod, str(container.get("name")))
        # the model's own name, as an InferenceService's storageUri tail: one model answers alike in both modes
        given = env.get("MODEL_NAME") or _args(container).get("model-name") or name
        model = annotations.get(MODEL_ANNOTATION) or given.rstrip("/").rsplit("/", 1)[-1] or name
        if MODEL_ANNOTATION not in annotations:
            self._time_plain_pod(pod, container, model)
            return  # reconciled again with the annotations
        ready = condition(pod, "Ready")
        if uid in self.servers or ready is None or ready.get("status") != "True" or FAILURE_ANNOTATION in annotations:
            return
        await self._serve(pod, container, model, env)

    def _time_plain_pod(self, pod: dict[str, Any], container: dict[str, Any], model: str) -> None:
        """A pod of tgis-tester's kind, as soon as it exists: the load time and memory fit of its model, as the
        InferenceService path puts them in the predictor's template (the pod's own sim.topsail.io/* win)."""
        metadata = pod["metadata"]
        try:
            wanted = model_annotations(container, model, self._node_profile(pod) if pod["spec"].get("nodeName")
                                       else self._cluster_profile(), download=False, settings=self._timing)
        except ValueError as error:
            wanted = {MODEL_ANNOTATION: model, FAILURE_ANNOTATION: str(error), ANNOTATION_PREFIX + "exit-code": "1",
                      ANNOTATION_PREFIX + "log": str(error)}
        own = metadata.get("annotations") or {}
        patch = {"metadata": {"annotations": {k: v for k, v in wanted.items() if k not in own}}}
        self.store.patch(self.pods, metadata.get("namespace") or "", metadata["name"], patch, MERGE_PATCH)

    async def _serve(self, pod: dict[str, Any], container: dict[str, Any], model: str, env: dict[str, str]) -> None:
        from pytest_topsail.tgis.server import ServerSettings, environment_settings, start_server

        http = http_port(container)
        try:
            settings = ServerSettings(model_name=model, config=model_config(container),
                                      gpu_profile=self._node_profile(pod), http_port=0 if http is not None else None,
                                      time_scale=self._timing.serving_time_scale,
                                      served=self._timing.catalog().find(model), **environment_settings(env))
            running = await start_server(settings)
        except (TopsailError, ValueError) as error:
            self.store.record_event(pod, "FailedToLoad", str(error), type="Warning", source=SOURCE)
            return
        metadata = pod["metadata"]
        self.servers[metadata["uid"]] = running
        endpoints = {f"{ENDPOINT_ANNOTATION}{grpc_port(container)}": running.address}
        if http is not None:
            endpoints[f"{ENDPOINT_ANNOTATION}{http}"] = f"{running.host}:{running.http_port}"
        patch = {"metadata": {"annotations": endpoints}}
        try:
            self.store.patch(self.pods, metadata.get("namespace") or "", metadata["name"], patch, MERGE_PATCH)
        except ApiError:
            self.servers.pop(metadata["uid"], None)
            await running.stop(0)
            return
        gpu_activity(self.store).report(metadata["uid"], Live(serving_usage(running.backend, settings),
                                                              str(container.get("name") or "")))
        own = metadata.get("annotations") or {}
        timing = ", ".join(f"{what} {own[key]} s" for what, key in (("download", DOWNLOAD_SECONDS_ANNOTATION),
                                                                     ("load", LOAD_SECONDS_ANNOTATION)) if key in own)
        self.store.record_event(pod, "ModelLoaded", f"TGIS reference server for {model} serving on "
                                f"{running.address}" + (f" (simulated {timing})" if timing else ""), source=SOURCE)

    def _node_profile(self, pod: dict[str, Any]) -> str:
        node = self.store.find(self.nodes, None, (pod.get("spec") or {}).get("nodeName") or "")
        return self._profile_of(node) if node is not None else "none"

    @staticmethod
    def _profile_of(node: dict[str, Any]) -> str:
        profile = profile_of_label((node["metadata"].get("labels") or {}).get("nvidia.com/gpu.product"))
        return profile.name if profile is not None else "none"

    def _cluster_profile(self) -> str:
        """The GPU profile predictor pods will land on: that of the first GPU node (the simulator's node pools)."""
        for node in sorted(self.store.list(self.nodes), key=lambda n: n["metadata"]["name"]):
            profile = self._profile_of(node)
            if profile != "none":
                return profile
        return "none"

    # ------------------------------------------------------------- InferenceServices
    def _reconcile_isvc(self, namespace: str, name: str) -> None:
        isvc = self.store.find(self.isvcs, namespace, name)
        if isvc is None or isvc["metadata"].get("deletionTimestamp"):
            return
        runtime = self._runtime(isvc)
        if runtime is None:
            wanted = (((isvc.get("spec") or {}).get("predictor") or {}).get("model") or {}).get("runtime")
            message = (f"No ServingRuntimes or ClusterServingRuntimes with the name: {wanted}" if wanted else
                       "No runtime found to support the predictor with the model format")
            self._set_status(isvc, _failure_status(isvc, "RuntimeNotRecognized", message, "InvalidSpec"))
            return
        predictor = self._ensure_predictor(isvc, runtime)
        if predictor is None:
            return
        self._set_status(isvc, self._status(isvc, predictor))

    def _runtime(self, isvc: dict[str, Any]) -> dict[str, Any] | None:
        model = ((isvc.get("spec") or {}).get("predictor") or {}).get("model") or {}
        namespace = isvc["metadata"].get("namespace") or ""
        if model.get("runtime"):
            return self.store.find(self.runtimes, namespace, str(model["runtime"]))
        format_name = (model.get("modelFormat") or {}).get("name")
        for runtime in self.store.list(self.runtimes, namespace):
            for supported in (runtime.get("spec") or {}).get("supportedModelFormats") or ():
                if supported.get("name") == format_name and supported.get("autoSelect"):
                    return runtime
        return None

    def _ensure_predictor(self, isvc: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any] | None:
        """The predictor Deployment: created with its Service when missing, its pod template replaced when the
        InferenceService's generation changed (a new spec rolls the predictor as KServe does)."""
        namespace, name = isvc["metadata"].get("namespace") or "", f"{isvc['metadata']['name']}-predictor"
        generation = str(isvc["metadata"].get("generation", 1))
        deployment = self.store.find(self.deployments, namespace, name)
        if deployment is not None and (deployment["metadata"].get("annotations") or {}).get(
                GENERATION_ANNOTATION) == generation:
            return deployment
        template, failure = self._pod_template(isvc, runtime)
        if template is None:
            self._set_status(isvc, _failure_status(isvc, "InvalidModelConfig", failure, "InvalidSpec"))
            return None
        labels = {ISVC_LABEL: isvc["metadata"]["name"], "app": f"isvc.{name}", "component": "predictor"}
        template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), **labels}
        metadata = {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner_reference(isvc)],
                    "annotations": {GENERATION_ANNOTATION: generation}}
        try:
            if deployment is not None:
                deployment = copy.deepcopy(deployment)
                deployment["metadata"].setdefault("annotations", {})[GENERATION_ANNOTATION] = generation
                deployment["spec"]["template"] = template
                return self.store.update(self.deployments, deployment)
            created = self.store.create(self.deployments, {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": copy.deepcopy(metadata),
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": f"isvc.{name}"}}, "template": template}})
            if self.store.find(self.services, namespace, name) is None:
                self.store.create(self.services, _service(metadata, template))
        except ApiError as error:
            if error.code == 409:
                raise  # changed meanwhile: reconciled again
            self.store.record_event(isvc, "InternalError", error.message, type="Warning", source=SOURCE)
            return None
        self.store.record_event(isvc, "Created", f"created predictor Deployment and Service {name}", source=SOURCE)
        return created

    def _pod_template(self, isvc: dict[str, Any], runtime: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        predictor = (isvc.get("spec") or {}).get("predictor") or {}
        model = predictor.get("model") or {}
        containers = copy.deepcopy((runtime.get("spec") or {}).get("containers") or [])
        if not containers:
            return None, f"ServingRuntime {runtime['metadata']['name']} has no containers"
        main = containers[0]
        main["args"] = [*(main.get("args") or ()), *(model.get("args") or ())]
        main["env"] = [*(main.get("env") or ()), *(model.get("env") or ())]
        resources = copy.deepcopy(main.get("resources") or {})
        for part in ("requests", "limits"):
            resources[part] = {**(resources.get(part) or {}), **((model.get("resources") or {}).get(part) or {})}
        main["resources"] = resources
        try:
            annotations = model_annotations(main, model_name(isvc), self._cluster_profile(),
                                            download=bool(model.get("storageUri")), settings=self._timing)
        except ValueError as error:
            return None, str(error)
        spec: dict[str, Any] = {"containers": containers}
        if model.get("storageUri"):
            spec["initContainers"] = [{"name": "storage-initializer", "image": "kserve/storage-initializer",
                                       "args": [str(model["storageUri"]), "/mnt/models"]}]
        overrides = {k: str(v) for k, v in (isvc["metadata"].get("annotations") or {}).items()
                     if k.startswith(ANNOTATION_PREFIX) and k != FAILURE_ANNOTATION}
        annotations.update(overrides)  # the user's timings (e.g. a shorter download) win over the model's
        for key in ("nodeSelector", "tolerations", "serviceAccountName"):
            if predictor.get(key):
                spec[key] = copy.deepcopy(predictor[key])
        return {"metadata": {"annotations": annotations, "labels": {}}, "spec": spec}, ""

    def _status(self, isvc: dict[str, Any], deployment: dict[str, Any]) -> dict[str, Any]:
        metadata = isvc["metadata"]
        namespace, name = metadata.get("namespace") or "", metadata["name"]
        pods = [p for p in self.store.list(self.pods, namespace, label_selector={ISVC_LABEL: name})
                if not p["metadata"].get("deletionTimestamp")]
        failure = (deployment["spec"]["template"]["metadata"].get("annotations") or {}).get(FAILURE_ANNOTATION)
        serving = [p for p in pods if any(k.startswith(ENDPOINT_ANNOTATION)
                                          for k in (p["metadata"].get("annotations") or {}))]
        crashed = [p for p in pods if _crashed(p)]
        if failure and crashed:
            return _failure_status(isvc, "ModelLoadFailed", failure, "BlockedByFailedLoad", exit_code=1)
        url = f"http://{name}-predictor.{namespace}.svc.cluster.local"
        if serving:
            states = {"activeModelState": "Loaded", "targetModelState": "Loaded"}
            ready, reason, transition = True, "", "UpToDate"
        else:
            loading = any((condition(p, "Initialized") or {}).get("status") == "True" for p in pods)
            states = {"activeModelState": "", "targetModelState": "Loading" if loading else "Pending"}
            ready, reason, transition = False, "PredictorNotReady" if pods else "PredictorNotCreated", "InProgress"
        conditions = list((isvc.get("status") or {}).get("conditions") or ())
        for kind in ("IngressReady", "PredictorReady", "Ready"):
            conditions = set_condition(conditions, _condition(kind, ready, reason))
        status = {"observedGeneration": metadata.get("generation", 1), "conditions": conditions,
                  "modelStatus": {"transitionStatus": transition, "states": states,
                                  "copies": {"failedCopies": 0, "totalCopies": len(serving)}},
                  "deploymentMode": "RawDeployment"}
        if ready:
            status.update({"url": url, "address": {"url": url},
                           "components": {"predictor": {"url": url}}})
        return status

    def _set_status(self, isvc: dict[str, Any], status: dict[str, Any]) -> None:
        if status == isvc.get("status"):
            return
        previous = (isvc.get("status") or {}).get("modelStatus", {}).get("states", {}).get("targetModelState")
        self.store.update(self.isvcs, {**isvc, "status": status}, subresource="status")
        target = status["modelStatus"]["states"]["targetModelState"]
        if target != previous and target in ("Loaded", "FailedToLoad"):
            failure = status["modelStatus"].get("lastFailureInfo") or {}
            self.store.record_event(isvc, "InferenceServiceReady" if target == "Loaded" else "FailedToLoad",
                                    failure.get("message") or "InferenceService is ready",
                                    type="Normal" if target == "Loaded" else "Warning", source=SOURCE)


def _service(metadata: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    ports = [{"name": p.get("name") or f"port-{p['containerPort']}", "port": int(p["containerPort"]),
              "targetPort": int(p["containerPort"]), "protocol": "TCP"}
             for c in template["spec"]["containers"] for p in c.get("ports") or () if p.get("containerPort")]
    return {"apiVersion": "v1", "kind": "Service", "metadata": copy.deepcopy(metadata),
            "spec": {"selector": {"app": metadata["labels"]["app"]},
                     "ports": ports or [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}


def _crashed(pod: dict[str, Any]) -> bool:
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        state = status.get("state") or {}
        if int(status.get("restartCount") or 0) > 0 or "terminated" in state or (
                (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff"):
            return True
    return (pod.get("status") or {}).get("phase") == "Failed"


def _condition(kind: str, ready: bool, reason: str, message: str = "") -> dict[str, Any]:
    cond = {"type": kind, "status": "True" if ready else "False", "lastTransitionTime": now_seconds()}
    if not ready:
        cond.update({"reason": reason, "message": message or reason})
    return cond


def _failure_status(isvc: dict[str, Any], reason: str, message: str, transition: str,
                    exit_code: int | None = None) -> dict[str, Any]:
    conditions = list((isvc.get("status") or {}).get("conditions") or ())
    for kind in ("PredictorReady", "Ready"):
        conditions = set_condition(conditions, _condition(kind, False, reason, message))
    failure: dict[str, Any] = {"reason": reason, "message": message, "time": now_seconds()}
    if exit_code is not None:
        failure["exitCode"] = exit_code
    previous = (((isvc.get("status") or {}).get("modelStatus") or {}).get("lastFailureInfo") or {})
    if previous.get("reason") == reason and previous.get("message") == message:
        failure["time"] = previous.get("time", failure["time"])  # unchanged failure: no new status write
    return {"observedGeneration": isvc["metadata"].get("generation", 1), "conditions": conditions,
            "modelStatus": {"transitionStatus": transition,
                            "states": {"activeModelState": "", "targetModelState": "FailedToLoad"},
                            "copies": {"failedCopies": 1 if exit_code is not None else 0, "totalCopies": 0},
                            "lastFailureInfo": failure},
            "deploymentMode": "RawDeployment"}



def serving_usage(backend: Any, settings: Any) -> Any:
    """What a model server does on its GPUs, read at each scrape (sim/node/gpuactivity.py): utilization follows the
    batch occupancy (running requests over max_batch_size), memory is the weights plus the KV cache of the running batch
    (tgis/sizing.py: the weights' 20% overhead is the full batch's KV cache and activations)."""
    from pytest_topsail.tgis.sizing import OVERHEAD, check_fit

    config = backend.config
    if config.is_cpu_only:
        return lambda: Usage(cpu_cores=1.0 + backend.running * 0.1, memory_bytes=0.0)
    try:
        full_mib = check_fit(config, settings.gpu_profile, settings.model_name, settings.served).required_gib * 1024
    except ValueError:  # a GPU profile sizing does not know: no memory figure
        full_mib = 0.0
    weights_mib = full_mib / OVERHEAD

    def read() -> Usage:
        occupancy = min(1.0, backend.running / config.max_batch_size)
        return Usage(100.0 * occupancy, weights_mib + (full_mib - weights_mib) * occupancy,
                     cpu_cores=0.5 + 0.5 * occupancy, memory_bytes=4 * 2**30)

    return read
