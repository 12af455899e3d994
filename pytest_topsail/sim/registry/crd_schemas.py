"""Structural schemas of the CRDs the simulator installs itself (OLM, GPU operator, NFD, OpenShift AI, Kubeflow,
KServe), written for the fields our controllers, fixtures and users rely on, after the upstream types' documented
fields (kubeflow training-operator v1, KServe v1beta1/v1alpha1, OLM, NVIDIA gpu-operator v1, NFD, opendatahub-operator
v1, Kueue v1beta1). Where upstream embeds a whole PodSpec or a free-form section, the schema keeps it open
(``x-kubernetes-preserve-unknown-fields``) below the fields listed; statuses are open with their known fields typed.

``openapi_schema(group, kind, version)`` gives the ``openAPIV3Schema`` to put in the CRD (an open one for a kind not
described here)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]
STRING: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
INT: Schema = {"type": "integer"}
INT_OR_STRING: Schema = {"x-kubernetes-int-or-string": True}
OPEN: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
QUANTITY: Schema = {"x-kubernetes-int-or-string": True,
                    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
                               r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"}


def obj(properties: dict[str, Schema] | None = None, *, required: tuple[str, ...] = (), open_: bool = False,
        **extra: Any) -> Schema:
    schema: Schema = {"type": "object", **extra}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    if open_:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


STRINGS = array(STRING)
RESOURCES = obj({"limits": {"type": "object", "additionalProperties": QUANTITY},
                 "requests": {"type": "object", "additionalProperties": QUANTITY}, "claims": array(OPEN)})
ENV_VAR = obj({"name": STRING, "value": STRING, "valueFrom": OPEN}, required=("name",))
ENV = array(ENV_VAR)
CONDITIONS = array(obj({"type": STRING, "status": STRING, "reason": STRING, "message": STRING,
                        "lastTransitionTime": STRING, "lastUpdateTime": STRING, "lastProbeTime": STRING,
                        "observedGeneration": INT, "severity": STRING}, open_=True))
CONTAINER_FIELDS: dict[str, Schema] = {
    "name": STRING, "image": STRING, "command": STRINGS, "args": STRINGS, "workingDir": STRING, "env": ENV,
    "envFrom": array(OPEN), "resources": RESOURCES, "ports": array(obj({
        "name": STRING, "containerPort": INT, "hostPort": INT, "hostIP": STRING,
        "protocol": {"type": "string", "default": "TCP"}}, required=("containerPort",))),
    "volumeMounts": array(OPEN), "volumeDevices": array(OPEN), "imagePullPolicy": STRING,
    "livenessProbe": OPEN, "readinessProbe": OPEN, "startupProbe": OPEN, "lifecycle": OPEN, "securityContext": OPEN,
    "terminationMessagePath": STRING, "terminationMessagePolicy": STRING, "stdin": BOOL, "stdinOnce": BOOL,
    "tty": BOOL, "resizePolicy": array(OPEN), "restartPolicy": STRING}
CONTAINER = obj(CONTAINER_FIELDS, required=("name",))
POD_SPEC_FIELDS: dict[str, Schema] = {
    "containers": array(CONTAINER), "initContainers": array(CONTAINER), "volumes": array(OPEN),
    "nodeSelector": STRING_MAP, "nodeName": STRING, "tolerations": array(OPEN), "affinity": OPEN,
    "serviceAccountName": STRING, "serviceAccount": STRING, "automountServiceAccountToken": BOOL,
    "imagePullSecrets": array(OPEN), "priorityClassName": STRING, "priority": INT, "schedulerName": STRING,
    "securityContext": OPEN, "hostNetwork": BOOL, "hostIPC": BOOL, "hostPID": BOOL, "dnsPolicy": STRING,
    "dnsConfig": OPEN, "restartPolicy": STRING, "terminationGracePeriodSeconds": INT,
    "activeDeadlineSeconds": INT, "runtimeClassName": STRING, "topologySpreadConstraints": array(OPEN),
    "enableServiceLinks": BOOL, "shareProcessNamespace": BOOL, "hostname": STRING, "subdomain": STRING,
    "hostAliases": array(OPEN), "readinessGates": array(OPEN), "overhead": OPEN, "preemptionPolicy": STRING,
    "schedulingGates": array(OPEN), "resourceClaims": array(OPEN), "setHostnameAsFQDN": BOOL, "os": OPEN,
    "hostUsers": BOOL, "ephemeralContainers": array(OPEN)}
POD_SPEC = obj(POD_SPEC_FIELDS)
POD_TEMPLATE = obj({"metadata": obj({"labels": STRING_MAP, "annotations": STRING_MAP, "name": STRING,
                                     "namespace": STRING}, open_=True),
                    "spec": POD_SPEC})


def _resource(spec: Schema, status: Schema | None = None) -> Schema:
    return obj({"apiVersion": STRING, "kind": STRING, "metadata": {"type": "object"}, "spec": spec,
                "status": status or OPEN})


# ----------------------------------------------------------------- Kubeflow training operator
REPLICA_SPEC = obj({"replicas": INT, "restartPolicy": enum("Always", "OnFailure", "Never", "ExitCode"),
                    "template": POD_TEMPLATE})
RUN_POLICY = obj({"cleanPodPolicy": enum("All", "Running", "None"), "ttlSecondsAfterFinished": INT,
                  "activeDeadlineSeconds": INT, "backoffLimit": INT, "schedulingPolicy": obj({
                      "minAvailable": INT, "queue": STRING, "minResources": obj(additionalProperties=QUANTITY),
                      "priorityClass": STRING, "scheduleTimeoutSeconds": INT}),
                  "suspend": BOOL, "managedBy": STRING})
PYTORCHJOB = _resource(obj({
    "pytorchReplicaSpecs": obj(additionalProperties=REPLICA_SPEC), "runPolicy": RUN_POLICY,
    "elasticPolicy": obj({"minReplicas": INT, "maxReplicas": INT, "rdzvBackend": STRING, "rdzvPort": INT,
                          "rdzvHost": STRING, "rdzvId": STRING, "rdzvConf": array(OPEN), "standalone": BOOL,
                          "nProcPerNode": INT, "maxRestarts": INT, "metrics": array(OPEN)}),
    "nprocPerNode": STRING}, required=("pytorchReplicaSpecs",)), obj({
        "conditions": CONDITIONS, "replicaStatuses": OPEN, "startTime": STRING, "completionTime": STRING,
        "lastReconcileTime": STRING}, open_=True))

# ----------------------------------------------------------------- KServe
MODEL_FORMAT = obj({"name": STRING, "version": STRING}, required=("name",))
MODEL = obj({**CONTAINER_FIELDS, "modelFormat": MODEL_FORMAT, "runtime": STRING, "protocolVersion": STRING,
             "storageUri": STRING, "runtimeVersion": STRING, "storage": obj({
                 "key": STRING, "path": STRING, "schemaPath": STRING, "parameters": STRING_MAP})},
            required=("modelFormat",))
COMPONENT_FIELDS: dict[str, Schema] = {
    **POD_SPEC_FIELDS, "minReplicas": INT, "maxReplicas": INT, "scaleTarget": INT,
    "scaleMetric": enum("cpu", "memory", "concurrency", "rps"), "scaleMetricType": STRING,
    "containerConcurrency": INT, "timeout": INT, "canaryTrafficPercent": INT, "logger": OPEN, "batcher": OPEN,
    "labels": STRING_MAP, "annotations": STRING_MAP, "deploymentStrategy": OPEN, "autoScaling": OPEN,
    "workerSpec": OPEN}
FRAMEWORKS = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml", "lightgbm",
              "paddle")
PREDICTOR = obj({**COMPONENT_FIELDS, "model": MODEL, **{name: obj(CONTAINER_FIELDS | {
    "storageUri": STRING, "runtimeVersion": STRING, "protocolVersion": STRING}) for name in FRAMEWORKS}})
INFERENCE_SERVICE = _resource(obj({
    "predictor": PREDICTOR, "explainer": obj(COMPONENT_FIELDS, open_=True),
    "transformer": obj(COMPONENT_FIELDS)}, required=("predictor",)), obj({
        "conditions": CONDITIONS, "url": STRING, "address": OPEN, "components": OPEN, "modelStatus": OPEN,
        "observedGeneration": INT, "deploymentMode": STRING}, open_=True))
SERVING_RUNTIME = _resource(obj({
    **POD_SPEC_FIELDS, "supportedModelFormats": array(obj({"name": STRING, "version": STRING,
                                                           "autoSelect": BOOL, "priority": INT},
                                                          required=("name",))),
    "multiModel": BOOL, "disabled": BOOL, "protocolVersions": STRINGS, "grpcEndpoint": STRING,
    "grpcDataEndpoint": STRING, "httpDataEndpoint": STRING, "replicas": INT, "storageHelper": obj({"disabled": BOOL}),
    "builtInAdapter": OPEN, "annotations": STRING_MAP, "labels": STRING_MAP, "workerSpec": OPEN},
    required=("containers",)))

# ----------------------------------------------------------------- OLM
SUBSCRIPTION = _resource(obj({
    "name": STRING, "channel": STRING, "source": STRING, "sourceNamespace": STRING, "startingCSV": STRING,
    "installPlanApproval": enum("Automatic", "Manual"), "config": OPEN},
    required=("name", "source", "sourceNamespace")))
OPERATOR_GROUP = _resource(obj({
    "targetNamespaces": STRINGS, "selector": OPEN, "serviceAccountName": STRING, "staticProvidedAPIs": BOOL,
    "upgradeStrategy": {"type": "string", "enum": ["Default", "TechPreviewUnsafeFailForward"],
                        "default": "Default"}}))
CATALOG_SOURCE = _resource(obj({
    "sourceType": STRING, "image": STRING, "displayName": STRING, "publisher": STRING, "description": STRING,
    "address": STRING, "configMap": STRING, "secrets": STRINGS, "priority": INT, "grpcPodConfig": OPEN,
    "updateStrategy": OPEN, "icon": OPEN, "runAsRoot": BOOL}, required=("sourceType",)))
CLUSTER_SERVICE_VERSION = _resource(obj({
    "displayName": STRING, "version": STRING, "replaces": STRING, "skips": STRINGS, "description": STRING,
    "install": OPEN, "customresourcedefinitions": OPEN, "apiservicedefinitions": OPEN, "installModes": array(OPEN),
    "maturity": STRING, "provider": OPEN, "keywords": STRINGS, "maintainers": array(OPEN), "links": array(OPEN),
    "icon": array(OPEN), "labels": STRING_MAP, "annotations": STRING_MAP, "selector": OPEN,
    "minKubeVersion": STRING, "nativeAPIs": array(OPEN), "relatedImages": array(OPEN), "webhookdefinitions":
        array(OPEN), "cleanup": OPEN}, open_=True))
INSTALL_PLAN = _resource(OPEN)

# ----------------------------------------------------------------- NVIDIA GPU operator, NFD
COMPONENT = obj({"enabled": BOOL, "repository": STRING, "image": STRING, "version": STRING,
                 "imagePullPolicy": STRING, "imagePullSecrets": STRINGS, "env": ENV, "args": STRINGS,
                 "resources": RESOURCES}, open_=True)
GPU_COMPONENTS = ("driver", "toolkit", "devicePlugin", "dcgmExporter", "dcgm", "nodeStatusExporter", "gfd",
                  "migManager", "validator", "mig", "gds", "gdrcopy", "vfioManager", "sandboxDevicePlugin",
                  "vgpuManager", "vgpuDeviceManager", "kataManager", "ccManager", "kataSandboxDevicePlugin")
CLUSTER_POLICY = _resource(obj({
    "operator": obj({"defaultRuntime": enum("docker", "crio", "containerd"), "runtimeClass": STRING,
                     "initContainer": OPEN, "use_ocp_driver_toolkit": BOOL, "annotations": STRING_MAP,
                     "labels": STRING_MAP}),
    "daemonsets": obj({"labels": STRING_MAP, "annotations": STRING_MAP, "priorityClassName": STRING,
                       "tolerations": array(OPEN), "updateStrategy": {"type": "string",
                                                                      "enum": ["RollingUpdate", "OnDelete"],
                                                                      "default": "RollingUpdate"},
                       "rollingUpdate": obj({"maxUnavailable": STRING})}),
    **{name: COMPONENT for name in GPU_COMPONENTS},
    "psp": obj({"enabled": BOOL}), "psa": obj({"enabled": BOOL}), "cdi": obj({"enabled": BOOL, "default": BOOL}),
    "sandboxWorkloads": obj({"enabled": BOOL, "defaultWorkload": STRING}), "hostPaths": OPEN},
    required=("daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd", "nodeStatusExporter",
              "operator", "toolkit")), obj({"state": enum("ignored", "ready", "notReady"), "namespace": STRING,
                                            "conditions": CONDITIONS}, open_=True))
NVIDIA_DRIVER = _resource(OPEN)
NODE_FEATURE_DISCOVERY = _resource(obj({
    "operand": obj({"image": STRING, "imagePullPolicy": STRING, "servicePort": INT, "resources": RESOURCES}),
    "workerConfig": obj({"configData": STRING}), "customConfig": obj({"configData": STRING}),
    "instance": STRING, "topologyupdater": BOOL, "prunerOnDelete": BOOL, "extraLabelNs": STRINGS,
    "resourceLabels": STRINGS, "enableTaints": BOOL, "labelWhiteList": STRING}))

# ----------------------------------------------------------------- OpenShift AI / Open Data Hub
MANAGEMENT_STATE = enum("Managed", "Removed", "Unmanaged")
DSC_COMPONENT = obj({"managementState": MANAGEMENT_STATE, "devFlags": OPEN}, open_=True)
DSC_COMPONENTS = ("dashboard", "workbenches", "modelmeshserving", "datasciencepipelines", "kserve", "kueue",
                  "codeflare", "ray", "trustyai", "modelregistry", "trainingoperator", "feastoperator",
                  "llamastackoperator")
DATA_SCIENCE_CLUSTER = _resource(obj({"components": obj({name: DSC_COMPONENT for name in DSC_COMPONENTS})}),
                                 obj({"phase": STRING, "conditions": CONDITIONS, "installedComponents": OPEN,
                                      "components": OPEN, "release": OPEN}, open_=True))
DSC_INITIALIZATION = _resource(obj({
    "applicationsNamespace": {"type": "string", "default": "opendatahub", "maxLength": 63,
                              "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"},
    "monitoring": obj({"managementState": MANAGEMENT_STATE, "namespace": STRING}, open_=True),
    "serviceMesh": obj({"managementState": MANAGEMENT_STATE, "controlPlane": OPEN, "auth": OPEN}),
    "trustedCABundle": obj({"managementState": MANAGEMENT_STATE, "customCABundle": STRING}),
    "devFlags": OPEN}),
                               obj({"phase": STRING, "conditions": CONDITIONS, "release": OPEN}, open_=True))

# ----------------------------------------------------------------- Kueue (kueue.x-k8s.io/v1beta1)
KUEUE_RESOURCE = obj({"name": STRING, "nominalQuota": QUANTITY, "borrowingLimit": QUANTITY,
                      "lendingLimit": QUANTITY}, required=("name", "nominalQuota"))
KUEUE_FLAVOR_QUOTAS = obj({"name": STRING, "resources": array(KUEUE_RESOURCE, maxItems=64)},
                          required=("name", "resources"))
KUEUE_USAGE = array(obj({"name": STRING, "resources": array(obj({"name": STRING, "total": QUANTITY,
                                                                  "borrowed": QUANTITY}))}))
KUEUE_COUNTERS = {"pendingWorkloads": INT, "reservingWorkloads": INT, "admittedWorkloads": INT,
                  "conditions": CONDITIONS}
RESOURCE_FLAVOR = _resource(obj({"nodeLabels": STRING_MAP, "nodeTaints": array(OPEN), "tolerations": array(OPEN),
                                 "topologyName": STRING}))
CLUSTER_QUEUE = _resource(obj({
    "resourceGroups": array(obj({"coveredResources": STRINGS, "flavors": array(KUEUE_FLAVOR_QUOTAS, maxItems=64)},
                                required=("coveredResources", "flavors")), maxItems=16),
    "cohort": STRING, "queueingStrategy": {"type": "string", "enum": ["StrictFIFO", "BestEffortFIFO"],
                                           "default": "BestEffortFIFO"},
    "namespaceSelector": OPEN,
    "preemption": obj({"withinClusterQueue": enum("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
                       "reclaimWithinCohort": enum("Never", "LowerPriority", "Any"),
                       "borrowWithinCohort": OPEN}),
    "flavorFungibility": OPEN, "admissionChecks": STRINGS, "stopPolicy": enum("None", "Hold", "HoldAndDrain")}),
    obj({**KUEUE_COUNTERS, "flavorsReservation": KUEUE_USAGE, "flavorsUsage": KUEUE_USAGE}, open_=True))
LOCAL_QUEUE = _resource(obj({"clusterQueue": STRING, "stopPolicy": enum("None", "Hold", "HoldAndDrain")}),
                        obj({**KUEUE_COUNTERS, "flavorsReservation": KUEUE_USAGE, "flavorUsage": KUEUE_USAGE},
                            open_=True))
WORKLOAD = _resource(obj({
    "podSets": array(obj({"name": STRING, "count": INT, "minCount": INT, "template": POD_TEMPLATE,
                          "topologyRequest": OPEN}, required=("name", "count", "template")), maxItems=8),
    "queueName": STRING, "priority": INT, "priorityClassName": STRING, "priorityClassSource": STRING,
    "active": BOOL, "maximumExecutionTimeSeconds": INT}, required=("podSets",)),
    obj({"conditions": CONDITIONS, "admission": obj({
        "clusterQueue": STRING, "podSetAssignments": array(obj({
            "name": STRING, "flavors": STRING_MAP, "resourceUsage": obj(additionalProperties=QUANTITY),
            "count": INT}))}), "admissionChecks": array(OPEN), "requeueState": OPEN, "reclaimablePods": array(OPEN)},
        open_=True))

_SCHEMAS: dict[tuple[str, str], Schema] = {
    ("kueue.x-k8s.io", "ResourceFlavor"): RESOURCE_FLAVOR,
    ("kueue.x-k8s.io", "ClusterQueue"): CLUSTER_QUEUE,
    ("kueue.x-k8s.io", "LocalQueue"): LOCAL_QUEUE,
    ("kueue.x-k8s.io", "Workload"): WORKLOAD,
    ("kubeflow.org", "PyTorchJob"): PYTORCHJOB,
    ("serving.kserve.io", "InferenceService"): INFERENCE_SERVICE,
    ("serving.kserve.io", "ServingRuntime"): SERVING_RUNTIME,
    ("operators.coreos.com", "Subscription"): SUBSCRIPTION,
    ("operators.coreos.com", "OperatorGroup"): OPERATOR_GROUP,
    ("operators.coreos.com", "CatalogSource"): CATALOG_SOURCE,
    ("operators.coreos.com", "ClusterServiceVersion"): CLUSTER_SERVICE_VERSION,
    ("operators.coreos.com", "InstallPlan"): INSTALL_PLAN,
    ("nvidia.com", "ClusterPolicy"): CLUSTER_POLICY,
    ("nvidia.com", "NVIDIADriver"): NVIDIA_DRIVER,
    ("nfd.openshift.io", "NodeFeatureDiscovery"): NODE_FEATURE_DISCOVERY,
    ("nfd.k8s-sigs.io", "NodeFeatureDiscovery"): NODE_FEATURE_DISCOVERY,
    ("datasciencecluster.opendatahub.io", "DataScienceCluster"): DATA_SCIENCE_CLUSTER,
    ("dscinitialization.opendatahub.io", "DSCInitialization"): DSC_INITIALIZATION,
}


def openapi_schema(group: str, kind: str, version: str = "") -> Schema:
    """The openAPIV3Schema of a kind the simulator installs; an open schema for any other."""
    return _SCHEMAS.get((group, kind), OPEN)
