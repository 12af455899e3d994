"""Resource types known to the simulated apiserver: the built-in ones and those registered by CRDs."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One resource of one API group/version, e.g. ("", "v1", "pods", "Pod", namespaced=True)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # CRD-defined types carry the CRD's name; built-ins leave it empty.
    crd_name: str = field(default="", compare=False)

    # Cached (in the instance's __dict__, outside the fields that equality and hashing use): read on every request.
    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def key(self) -> tuple[str, str]:
        """Storage identity: objects are shared by all versions of a (group, plural)."""
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool, subresources: tuple[str, ...] = (),
        short: tuple[str, ...] = (), categories: tuple[str, ...] = (), verbs: tuple[str, ...] = ALL_VERBS
        ) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, subresources, kind.lower(), short, categories, verbs)


_ALL = ("all",)
CREATE_ONLY = ("create",)  # reviews: answered, never stored


def _review(group: str, plural: str, kind: str, namespaced: bool = False) -> ResourceType:
    return _rt(group, "v1", plural, kind, namespaced, verbs=CREATE_ONLY)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _rt("", "v1", "pods", "Pod", True, ("status", "log", "exec", "attach", "portforward", "eviction", "binding",
                                        "proxy", "ephemeralcontainers"), ("po",), _ALL),
    _rt("", "v1", "nodes", "Node", False, ("status", "proxy"), ("no",)),
    _rt("", "v1", "namespaces", "Namespace", False, ("status", "finalize"), ("ns",)),
    _rt("", "v1", "services", "Service", True, ("status", "proxy"), ("svc",), _ALL),
    _rt("", "v1", "endpoints", "Endpoints", True, (), ("ep",)),
    _rt("", "v1", "configmaps", "ConfigMap", True, (), ("cm",)),
    _rt("", "v1", "secrets", "Secret", True),
    _rt("", "v1", "events", "Event", True, (), ("ev",)),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("status",), ("pvc",)),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", False, ("status",), ("pv",)),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", True, ("token",), ("sa",)),
    _rt("", "v1", "resourcequotas", "ResourceQuota", True, ("status",), ("quota",)),
    _rt("", "v1", "limitranges", "LimitRange", True, (), ("limits",)),
    _rt("", "v1", "replicationcontrollers", "ReplicationController", True, ("status", "scale"), ("rc",), _ALL),
    _rt("", "v1", "podtemplates", "PodTemplate", True),
    _rt("apps", "v1", "deployments", "Deployment", True, ("status", "scale"), ("deploy",), _ALL),
    _rt("apps", "v1", "replicasets", "ReplicaSet", True, ("status", "scale"), ("rs",), _ALL),
    _rt("apps", "v1", "statefulsets", "StatefulSet", True, ("status", "scale"), ("sts",), _ALL),
    _rt("apps", "v1", "daemonsets", "DaemonSet", True, ("status",), ("ds",), _ALL),
    _rt("batch", "v1", "jobs", "Job", True, ("status",), (), _ALL),
    _rt("batch", "v1", "cronjobs", "CronJob", True, ("status",), ("cj",), _ALL),
    _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, ("status",),
        ("crd", "crds")),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, (), ("sc",)),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", True),
    _rt("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, (), ("pc",)),
    _rt("apps", "v1", "controllerrevisions", "ControllerRevision", True),
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("status",), ("pdb",)),
    _rt("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("status",), ("hpa",),
        _ALL),
    _rt("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, ("status",), ("hpa",),
        _ALL),
    _rt("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, (), ("netpol",)),
    _rt("networking.k8s.io", "v1", "ingresses", "Ingress", True, ("status",), ("ing",)),
    _rt("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False),
    _rt("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    _rt("events.k8s.io", "v1", "events", "Event", True, (), ("ev",)),
    _rt("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, ("status",), (), ("api-extensions",)),
    _rt("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
    _rt("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False,
        ("status", "approval"), ("csr",)),
    _rt("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
        False, (), (), ("api-extensions",)),
    _rt("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
        False, (), (), ("api-extensions",)),
    _rt("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    _rt("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    _rt("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, ("status",)),
    _review("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    _review("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    _review("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview"),
    _review("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", namespaced=True),
    _review("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview"),
    _review("authentication.k8s.io", "tokenreviews", "TokenReview"),
)


def types_from_crd(crd: dict) -> list[ResourceType]:
    """The served versions of a CustomResourceDefinition, storage version first. Raises ValueError if malformed."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group")
    plural = names.get("plural")
    kind = names.get("kind")
    if not group or not plural or not kind:
        raise ValueError("spec.group, spec.names.plural and spec.names.kind are required")
    scope = spec.get("scope", "Namespaced")
    if scope not in ("Namespaced", "Cluster"):
        raise ValueError(f'spec.scope: Unsupported value: "{scope}": supported values: "Cluster", "Namespaced"')
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    if not versions:
        raise ValueError("spec.versions: must have at least one served version")
    versions.sort(key=lambda v: not v.get("storage", False))
    result = []
    for version in versions:
        subresources = tuple(sorted((version.get("subresources") or {}).keys()))
        result.append(ResourceType(
            group=group,
            version=version["name"],
            plural=plural,
            kind=kind,
            namespaced=scope == "Namespaced",
            subresources=subresources,
            singular=names.get("singular") or kind.lower(),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            crd_name=(crd.get("metadata") or {}).get("name", ""),
        ))
    return result
