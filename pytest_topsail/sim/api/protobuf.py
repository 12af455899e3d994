"""Kubernetes protobuf request bodies (``Content-Type: application/vnd.kubernetes.protobuf``) decoded to JSON objects.

kubectl 1.32 and later send protobuf for the objects its generator commands build with the typed clients
(``kubectl create namespace|configmap|secret|serviceaccount|service|quota|job|cronjob|deployment|role|
rolebinding|clusterrole|clusterrolebinding``). A body is the
4-byte magic ``k8s\\0`` followed by a ``runtime.Unknown`` message {1 typeMeta {1 apiVersion, 2 kind}, 2 raw,
3 contentEncoding, 4 contentType}; ``raw`` is the object's own message. The schemas below give, per message, the field
numbers, JSON names and types (the k8s.io/api generated.proto numbering) of the kinds above and of everything they
contain; other kinds get 415 with a hint to send JSON. Types: s string, i integer, b bool, y bytes (base64 in JSON),
d double, q resource quantity, o int-or-string, t time, ``map:X`` a map of string to X, a message name, ``*`` repeated.

As in Go's JSON encoding of these types, empty strings and false booleans (non-pointer fields the protobuf encoder
always writes) are left out; numbers are kept, since a zero may be meaningful (``replicas: 0``).
"""

from __future__ import annotations

import base64
import struct
from datetime import UTC, datetime
from functools import cache
from typing import Any

from pytest_topsail.sim.machinery.apierror import ApiError

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# The root message of each kind this module decodes, by (API group, kind).
ROOT_MESSAGES = {
    ("", "Namespace"): "Namespace", ("", "ConfigMap"): "ConfigMap", ("", "Secret"): "Secret",
    ("", "ServiceAccount"): "ServiceAccount", ("", "Service"): "Service", ("", "ResourceQuota"): "ResourceQuota",
    ("", "Pod"): "Pod", ("", "PersistentVolumeClaim"): "PersistentVolumeClaim",
    ("batch", "Job"): "Job", ("batch", "CronJob"): "CronJob", ("apps", "Deployment"): "Deployment",
    ("rbac.authorization.k8s.io", "Role"): "Role", ("rbac.authorization.k8s.io", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "RoleBinding",
    ("authorization.k8s.io", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
    ("authorization.k8s.io", "SubjectAccessReview"): "SubjectAccessReview",
    ("authorization.k8s.io", "LocalSubjectAccessReview"): "SubjectAccessReview",
    ("authentication.k8s.io", "SelfSubjectReview"): "SelfSubjectReview",
    ("authentication.k8s.io", "TokenReview"): "TokenReview",
}

# kubectl auth can-i / whoami send these (statuses are the server's to fill, never decoded)
_REVIEW_SCHEMAS = {
    "SelfSubjectAccessReview": "1 metadata ObjectMeta; 2 spec SelfSubjectAccessReviewSpec",
    "SelfSubjectAccessReviewSpec": "1 resourceAttributes ResourceAttributes; 2 nonResourceAttributes "
                                   "NonResourceAttributes",
    "ResourceAttributes": "1 namespace s; 2 verb s; 3 group s; 4 version s; 5 resource s; 6 subresource s; 7 name s",
    "NonResourceAttributes": "1 path s; 2 verb s",
    "SelfSubjectRulesReview": "1 metadata ObjectMeta; 2 spec SelfSubjectRulesReviewSpec",
    "SelfSubjectRulesReviewSpec": "1 namespace s",
    "SubjectAccessReview": "1 metadata ObjectMeta; 2 spec SubjectAccessReviewSpec",
    "SubjectAccessReviewSpec": "1 resourceAttributes ResourceAttributes; 2 nonResourceAttributes "
                               "NonResourceAttributes; 3 user s; 4 groups s*; 6 uid s",
    "SelfSubjectReview": "1 metadata ObjectMeta",
    "TokenReview": "1 metadata ObjectMeta; 2 spec TokenReviewSpec",
    "TokenReviewSpec": "1 token s; 2 audiences s*",
}

_RBAC_SCHEMAS = {
    "Role": "1 metadata ObjectMeta; 2 rules PolicyRule*",
    "ClusterRole": "1 metadata ObjectMeta; 2 rules PolicyRule*; 3 aggregationRule AggregationRule",
    "AggregationRule": "1 clusterRoleSelectors LabelSelector*",
    "PolicyRule": "1 verbs s*; 2 apiGroups s*; 3 resources s*; 4 resourceNames s*; 5 nonResourceURLs s*",
    "RoleBinding": "1 metadata ObjectMeta; 2 subjects Subject*; 3 roleRef RoleRef",  # ClusterRoleBinding alike
    "Subject": "1 kind s; 2 apiGroup s; 3 name s; 4 namespace s",
    "RoleRef": "1 apiGroup s; 2 kind s; 3 name s",
}

_META_SCHEMAS = {
    "ObjectMeta": (
        "1 name s; 2 generateName s; 3 namespace s; 4 selfLink s; 5 uid s; 6 resourceVersion s; 7 generation i; "
        "8 creationTimestamp t; 9 deletionTimestamp t; 10 deletionGracePeriodSeconds i; 11 labels map:s; "
        "12 annotations map:s; 13 ownerReferences OwnerReference*; 14 finalizers s*"
    ),
    "OwnerReference": "1 kind s; 3 name s; 4 uid s; 5 apiVersion s; 6 controller b; 7 blockOwnerDeletion b",
    "LabelSelector": "1 matchLabels map:s; 2 matchExpressions LabelSelectorRequirement*",
    "LabelSelectorRequirement": "1 key s; 2 operator s; 3 values s*",
}

_SCHEMAS = {
    "Namespace": "1 metadata ObjectMeta; 2 spec NamespaceSpec; 3 status NamespaceStatus",
    "NamespaceSpec": "1 finalizers s*",
    "NamespaceStatus": "1 phase s; 2 conditions NamespaceCondition*",
    "NamespaceCondition": "1 type s; 2 status s; 4 lastTransitionTime t; 5 reason s; 6 message s",
    "ConfigMap": "1 metadata ObjectMeta; 2 data map:s; 3 binaryData map:y; 4 immutable b",
    "Secret": "1 metadata ObjectMeta; 2 data map:y; 3 type s; 4 stringData map:s; 5 immutable b",
    "ServiceAccount": (
        "1 metadata ObjectMeta; 2 secrets ObjectReference*; 3 imagePullSecrets LocalObjectReference*; "
        "4 automountServiceAccountToken b"
    ),
    "ObjectReference": (
        "1 kind s; 2 namespace s; 3 name s; 4 uid s; 5 apiVersion s; 6 resourceVersion s; 7 fieldPath s"
    ),
    "LocalObjectReference": "1 name s",
    "Service": "1 metadata ObjectMeta; 2 spec ServiceSpec; 3 status ServiceStatus",
    "ServiceSpec": (
        "1 ports ServicePort*; 2 selector map:s; 3 clusterIP s; 4 type s; 5 externalIPs s*; "
        "7 sessionAffinity s; 8 loadBalancerIP s; 9 loadBalancerSourceRanges s*; 10 externalName s; "
        "11 externalTrafficPolicy s; 12 healthCheckNodePort i; 13 publishNotReadyAddresses b; "
        "14 sessionAffinityConfig SessionAffinityConfig; 17 ipFamilyPolicy s; 18 clusterIPs s*; "
        "19 ipFamilies s*; 20 allocateLoadBalancerNodePorts b; 21 loadBalancerClass s; "
        "22 internalTrafficPolicy s"
    ),
    "ServicePort": "1 name s; 2 protocol s; 3 port i; 4 targetPort o; 5 nodePort i; 6 appProtocol s",
    "SessionAffinityConfig": "1 clientIP ClientIPConfig",
    "ClientIPConfig": "1 timeoutSeconds i",
    "ServiceStatus": "1 loadBalancer LoadBalancerStatus",
    "LoadBalancerStatus": "1 ingress LoadBalancerIngress*",
    "LoadBalancerIngress": "1 ip s; 2 hostname s; 4 ports PortStatus*",
    "PortStatus": "1 port i; 2 protocol s; 3 error s",
    "ResourceQuota": "1 metadata ObjectMeta; 2 spec ResourceQuotaSpec; 3 status ResourceQuotaStatus",
    "ResourceQuotaSpec": "1 hard map:q; 2 scopes s*; 3 scopeSelector ScopeSelector",
    "ScopeSelector": "1 matchExpressions ScopedResourceSelectorRequirement*",
    "ScopedResourceSelectorRequirement": "1 scopeName s; 2 operator s; 3 values s*",
    "ResourceQuotaStatus": "1 hard map:q; 2 used map:q",
    "Job": "1 metadata ObjectMeta; 2 spec JobSpec; 3 status JobStatus",
    "JobSpec": (
        "1 parallelism i; 2 completions i; 3 activeDeadlineSeconds i; 4 selector LabelSelector; "
        "5 manualSelector b; 6 template PodTemplateSpec; 7 backoffLimit i; 8 ttlSecondsAfterFinished i; "
        "9 completionMode s; 10 suspend b; 11 podFailurePolicy PodFailurePolicy"
    ),
    "PodTemplateSpec": "1 metadata ObjectMeta; 2 spec PodSpec",
    "PodSpec": (
        "1 volumes Volume*; 2 containers Container*; 3 restartPolicy s; 4 terminationGracePeriodSeconds i; "
        "5 activeDeadlineSeconds i; 6 dnsPolicy s; 7 nodeSelector map:s; 8 serviceAccountName s; "
        "9 serviceAccount s; 10 nodeName s; 11 hostNetwork b; 12 hostPID b; 13 hostIPC b; "
        "14 securityContext PodSecurityContext; 15 imagePullSecrets LocalObjectReference*; 16 hostname s; "
        "17 subdomain s; 18 affinity Affinity; 19 schedulerName s; 20 initContainers Container*; "
        "21 automountServiceAccountToken b; 22 tolerations Toleration*; 23 hostAliases HostAlias*; "
        "24 priorityClassName s; 25 priority i; 26 dnsConfig PodDNSConfig; 27 shareProcessNamespace b; "
        "28 readinessGates PodReadinessGate*; 29 runtimeClassName s; 30 enableServiceLinks b; "
        "31 preemptionPolicy s; 32 overhead map:q; 33 topologySpreadConstraints TopologySpreadConstraint*; "
        "34 ephemeralContainers EphemeralContainer*; 35 setHostnameAsFQDN b; 36 os PodOS; 37 hostUsers b; "
        "38 schedulingGates PodSchedulingGate*; 39 resourceClaims PodResourceClaim*"
    ),
    "Volume": "1 name s; 2 volumeSource VolumeSource",
    "VolumeSource": (
        "1 hostPath HostPathVolumeSource; 2 emptyDir EmptyDirVolumeSource; "
        "3 gcePersistentDisk GCEPersistentDiskVolumeSource; "
        "4 awsElasticBlockStore AWSElasticBlockStoreVolumeSource; 5 gitRepo GitRepoVolumeSource; "
        "6 secret SecretVolumeSource; 7 nfs NFSVolumeSource; 8 iscsi ISCSIVolumeSource; "
        "9 glusterfs GlusterfsVolumeSource; 10 persistentVolumeClaim PersistentVolumeClaimVolumeSource; "
        "11 rbd RBDVolumeSource; 12 flexVolume FlexVolumeSource; 13 cinder CinderVolumeSource; "
        "14 cephfs CephFSVolumeSource; 15 flocker FlockerVolumeSource; 16 downwardAPI DownwardAPIVolumeSource; "
        "17 fc FCVolumeSource; 18 azureFile AzureFileVolumeSource; 19 configMap ConfigMapVolumeSource; "
        "20 vsphereVolume VsphereVirtualDiskVolumeSource; 21 quobyte QuobyteVolumeSource; "
        "22 azureDisk AzureDiskVolumeSource; 23 photonPersistentDisk PhotonPersistentDiskVolumeSource; "
        "24 portworxVolume PortworxVolumeSource; 25 scaleIO ScaleIOVolumeSource; "
        "26 projected ProjectedVolumeSource; 27 storageos StorageOSVolumeSource; 28 csi CSIVolumeSource; "
        "29 ephemeral EphemeralVolumeSource"
    ),
    "HostPathVolumeSource": "1 path s; 2 type s",
    "EmptyDirVolumeSource": "1 medium s; 2 sizeLimit q",
    "GCEPersistentDiskVolumeSource": "1 pdName s; 2 fsType s; 3 partition i; 4 readOnly b",
    "AWSElasticBlockStoreVolumeSource": "1 volumeID s; 2 fsType s; 3 partition i; 4 readOnly b",
    "GitRepoVolumeSource": "1 repository s; 2 revision s; 3 directory s",
    "SecretVolumeSource": "1 secretName s; 2 items KeyToPath*; 3 defaultMode i; 4 optional b",
    "KeyToPath": "1 key s; 2 path s; 3 mode i",
    "NFSVolumeSource": "1 server s; 2 path s; 3 readOnly b",
    "ISCSIVolumeSource": (
        "1 targetPortal s; 2 iqn s; 3 lun i; 4 iscsiInterface s; 5 fsType s; 6 readOnly b; 7 portals s*; "
        "8 chapAuthDiscovery b; 10 secretRef LocalObjectReference; 11 chapAuthSession b; 12 initiatorName s"
    ),
    "GlusterfsVolumeSource": "1 endpoints s; 2 path s; 3 readOnly b",
    "PersistentVolumeClaimVolumeSource": "1 claimName s; 2 readOnly b",
    "RBDVolumeSource": (
        "1 monitors s*; 2 image s; 3 fsType s; 4 pool s; 5 user s; 6 keyring s; "
        "7 secretRef LocalObjectReference; 8 readOnly b"
    ),
    "FlexVolumeSource": "1 driver s; 2 fsType s; 3 secretRef LocalObjectReference; 4 readOnly b; 5 options map:s",
    "CinderVolumeSource": "1 volumeID s; 2 fsType s; 3 readOnly b; 4 secretRef LocalObjectReference",
    "CephFSVolumeSource": (
        "1 monitors s*; 2 path s; 3 user s; 4 secretFile s; 5 secretRef LocalObjectReference; 6 readOnly b"
    ),
    "FlockerVolumeSource": "1 datasetName s; 2 datasetUUID s",
    "DownwardAPIVolumeSource": "1 items DownwardAPIVolumeFile*; 2 defaultMode i",
    "DownwardAPIVolumeFile": (
        "1 path s; 2 fieldRef ObjectFieldSelector; 3 resourceFieldRef ResourceFieldSelector; 4 mode i"
    ),
    "ObjectFieldSelector": "1 apiVersion s; 2 fieldPath s",
    "ResourceFieldSelector": "1 containerName s; 2 resource s; 3 divisor q",
    "FCVolumeSource": "1 targetWWNs s*; 2 lun i; 3 fsType s; 4 readOnly b; 5 wwids s*",
    "AzureFileVolumeSource": "1 secretName s; 2 shareName s; 3 readOnly b",
    "ConfigMapVolumeSource": (
        "1 localObjectReference LocalObjectReference; 2 items KeyToPath*; 3 defaultMode i; 4 optional b"
    ),
    "VsphereVirtualDiskVolumeSource": "1 volumePath s; 2 fsType s; 3 storagePolicyName s; 4 storagePolicyID s",
    "QuobyteVolumeSource": "1 registry s; 2 volume s; 3 readOnly b; 4 user s; 5 group s; 6 tenant s",
    "AzureDiskVolumeSource": "1 diskName s; 2 diskURI s; 3 cachingMode s; 4 fsType s; 5 readOnly b; 6 kind s",
    "PhotonPersistentDiskVolumeSource": "1 pdID s; 2 fsType s",
    "PortworxVolumeSource": "1 volumeID s; 2 fsType s; 3 readOnly b",
    "ScaleIOVolumeSource": (
        "1 gateway s; 2 system s; 3 secretRef LocalObjectReference; 4 sslEnabled b; 5 protectionDomain s; "
        "6 storagePool s; 7 storageMode s; 8 volumeName s; 9 fsType s; 10 readOnly b"
    ),
    "ProjectedVolumeSource": "1 sources VolumeProjection*; 2 defaultMode i",
    "VolumeProjection": (
        "1 secret SecretProjection; 2 downwardAPI DownwardAPIProjection; 3 configMap ConfigMapProjection; "
        "4 serviceAccountToken ServiceAccountTokenProjection"
    ),
    "SecretProjection": "1 localObjectReference LocalObjectReference; 2 items KeyToPath*; 4 optional b",
    "DownwardAPIProjection": "1 items DownwardAPIVolumeFile*",
    "ConfigMapProjection": "1 localObjectReference LocalObjectReference; 2 items KeyToPath*; 4 optional b",
    "ServiceAccountTokenProjection": "1 audience s; 2 expirationSeconds i; 3 path s",
    "StorageOSVolumeSource": (
        "1 volumeName s; 2 volumeNamespace s; 3 fsType s; 4 readOnly b; 5 secretRef LocalObjectReference"
    ),
    "CSIVolumeSource": (
        "1 driver s; 2 readOnly b; 3 fsType s; 4 volumeAttributes map:s; "
        "5 nodePublishSecretRef LocalObjectReference"
    ),
    "EphemeralVolumeSource": "1 volumeClaimTemplate PersistentVolumeClaimTemplate",
    "PersistentVolumeClaimTemplate": "1 metadata ObjectMeta; 2 spec PersistentVolumeClaimSpec",
    "PersistentVolumeClaimSpec": (
        "1 accessModes s*; 2 resources ResourceRequirements; 3 volumeName s; 4 selector LabelSelector; "
        "5 storageClassName s; 6 volumeMode s; 7 dataSource TypedLocalObjectReference; "
        "8 dataSourceRef TypedObjectReference"
    ),
    "ResourceRequirements": "1 limits map:q; 2 requests map:q; 3 claims ResourceClaim*",
    "ResourceClaim": "1 name s",
    "TypedLocalObjectReference": "1 apiGroup s; 2 kind s; 3 name s",
    "TypedObjectReference": "1 apiGroup s; 2 kind s; 3 name s; 4 namespace s",
    "Container": (
        "1 name s; 2 image s; 3 command s*; 4 args s*; 5 workingDir s; 6 ports ContainerPort*; 7 env EnvVar*; "
        "8 resources ResourceRequirements; 9 volumeMounts VolumeMount*; 10 livenessProbe Probe; "
        "11 readinessProbe Probe; 12 lifecycle Lifecycle; 13 terminationMessagePath s; 14 imagePullPolicy s; "
        "15 securityContext SecurityContext; 16 stdin b; 17 stdinOnce b; 18 tty b; 19 envFrom EnvFromSource*; "
        "20 terminationMessagePolicy s; 21 volumeDevices VolumeDevice*; 22 startupProbe Probe"
    ),
    "ContainerPort": "1 name s; 2 hostPort i; 3 containerPort i; 4 protocol s; 5 hostIP s",
    "EnvVar": "1 name s; 2 value s; 3 valueFrom EnvVarSource",
    "EnvVarSource": (
        "1 fieldRef ObjectFieldSelector; 2 resourceFieldRef ResourceFieldSelector; "
        "3 configMapKeyRef ConfigMapKeySelector; 4 secretKeyRef SecretKeySelector"
    ),
    "ConfigMapKeySelector": "1 localObjectReference LocalObjectReference; 2 key s; 3 optional b",
    "SecretKeySelector": "1 localObjectReference LocalObjectReference; 2 key s; 3 optional b",
    "VolumeMount": "1 name s; 2 readOnly b; 3 mountPath s; 4 subPath s; 5 mountPropagation s; 6 subPathExpr s",
    "Probe": (
        "1 handler ProbeHandler; 2 initialDelaySeconds i; 3 timeoutSeconds i; 4 periodSeconds i; "
        "5 successThreshold i; 6 failureThreshold i; 7 terminationGracePeriodSeconds i"
    ),
    "ProbeHandler": "1 exec ExecAction; 2 httpGet HTTPGetAction; 3 tcpSocket TCPSocketAction; 4 grpc GRPCAction",
    "ExecAction": "1 command s*",
    "HTTPGetAction": "1 path s; 2 port o; 3 host s; 4 scheme s; 5 httpHeaders HTTPHeader*",
    "HTTPHeader": "1 name s; 2 value s",
    "TCPSocketAction": "1 port o; 2 host s",
    "GRPCAction": "1 port i; 2 service s",
    "Lifecycle": "1 postStart LifecycleHandler; 2 preStop LifecycleHandler",
    "LifecycleHandler": "1 exec ExecAction; 2 httpGet HTTPGetAction; 3 tcpSocket TCPSocketAction",
    "SecurityContext": (
        "1 capabilities Capabilities; 2 privileged b; 3 seLinuxOptions SELinuxOptions; 4 runAsUser i; "
        "5 runAsNonRoot b; 6 readOnlyRootFilesystem b; 7 allowPrivilegeEscalation b; 8 runAsGroup i; "
        "9 procMount s; 10 windowsOptions WindowsSecurityContextOptions; 11 seccompProfile SeccompProfile"
    ),
    "Capabilities": "1 add s*; 2 drop s*",
    "SELinuxOptions": "1 user s; 2 role s; 3 type s; 4 level s",
    "WindowsSecurityContextOptions": (
        "1 gmsaCredentialSpecName s; 2 gmsaCredentialSpec s; 3 runAsUserName s; 4 hostProcess b"
    ),
    "SeccompProfile": "1 type s; 2 localhostProfile s",
    "EnvFromSource": "1 prefix s; 2 configMapRef ConfigMapEnvSource; 3 secretRef SecretEnvSource",
    "ConfigMapEnvSource": "1 localObjectReference LocalObjectReference; 2 optional b",
    "SecretEnvSource": "1 localObjectReference LocalObjectReference; 2 optional b",
    "VolumeDevice": "1 name s; 2 devicePath s",
    "PodSecurityContext": (
        "1 seLinuxOptions SELinuxOptions; 2 runAsUser i; 3 runAsNonRoot b; 4 supplementalGroups i*; "
        "5 fsGroup i; 6 runAsGroup i; 7 sysctls Sysctl*; 8 windowsOptions WindowsSecurityContextOptions; "
        "9 fsGroupChangePolicy s; 10 seccompProfile SeccompProfile"
    ),
    "Sysctl": "1 name s; 2 value s",
    "Affinity": "1 nodeAffinity NodeAffinity; 2 podAffinity PodAffinity; 3 podAntiAffinity PodAntiAffinity",
    "NodeAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector; "
        "2 preferredDuringSchedulingIgnoredDuringExecution PreferredSchedulingTerm*"
    ),
    "NodeSelector": "1 nodeSelectorTerms NodeSelectorTerm*",
    "NodeSelectorTerm": "1 matchExpressions NodeSelectorRequirement*; 2 matchFields NodeSelectorRequirement*",
    "NodeSelectorRequirement": "1 key s; 2 operator s; 3 values s*",
    "PreferredSchedulingTerm": "1 weight i; 2 preference NodeSelectorTerm",
    "PodAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution PodAffinityTerm*; "
        "2 preferredDuringSchedulingIgnoredDuringExecution WeightedPodAffinityTerm*"
    ),
    "PodAffinityTerm": (
        "1 labelSelector LabelSelector; 2 namespaces s*; 3 topologyKey s; 4 namespaceSelector LabelSelector"
    ),
    "WeightedPodAffinityTerm": "1 weight i; 2 podAffinityTerm PodAffinityTerm",
    "PodAntiAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution PodAffinityTerm*; "
        "2 preferredDuringSchedulingIgnoredDuringExecution WeightedPodAffinityTerm*"
    ),
    "Toleration": "1 key s; 2 operator s; 3 value s; 4 effect s; 5 tolerationSeconds i",
    "HostAlias": "1 ip s; 2 hostnames s*",
    "PodDNSConfig": "1 nameservers s*; 2 searches s*; 3 options PodDNSConfigOption*",
    "PodDNSConfigOption": "1 name s; 2 value s",
    "PodReadinessGate": "1 conditionType s",
    "TopologySpreadConstraint": (
        "1 maxSkew i; 2 topologyKey s; 3 whenUnsatisfiable s; 4 labelSelector LabelSelector; 5 minDomains i; "
        "6 nodeAffinityPolicy s; 7 nodeTaintsPolicy s; 8 matchLabelKeys s*"
    ),
    "EphemeralContainer": "1 ephemeralContainerCommon EphemeralContainerCommon; 2 targetContainerName s",
    "EphemeralContainerCommon": (
        "1 name s; 2 image s; 3 command s*; 4 args s*; 5 workingDir s; 6 ports ContainerPort*; 7 env EnvVar*; "
        "8 resources ResourceRequirements; 9 volumeMounts VolumeMount*; 10 livenessProbe Probe; "
        "11 readinessProbe Probe; 12 lifecycle Lifecycle; 13 terminationMessagePath s; 14 imagePullPolicy s; "
        "15 securityContext SecurityContext; 16 stdin b; 17 stdinOnce b; 18 tty b; 19 envFrom EnvFromSource*; "
        "20 terminationMessagePolicy s; 21 volumeDevices VolumeDevice*; 22 startupProbe Probe"
    ),
    "PodOS": "1 name s",
    "PodSchedulingGate": "1 name s",
    "PodResourceClaim": "1 name s; 2 source ClaimSource",
    "ClaimSource": "1 resourceClaimName s; 2 resourceClaimTemplateName s",
    "PodFailurePolicy": "1 rules PodFailurePolicyRule*",
    "PodFailurePolicyRule": (
        "1 action s; 2 onExitCodes PodFailurePolicyOnExitCodesRequirement; "
        "3 onPodConditions PodFailurePolicyOnPodConditionsPattern*"
    ),
    "PodFailurePolicyOnExitCodesRequirement": "1 containerName s; 2 operator s; 3 values i*",
    "PodFailurePolicyOnPodConditionsPattern": "1 type s; 2 status s",
    "JobStatus": (
        "1 conditions JobCondition*; 2 startTime t; 3 completionTime t; 4 active i; 5 succeeded i; 6 failed i; "
        "7 completedIndexes s; 8 uncountedTerminatedPods UncountedTerminatedPods; 9 ready i"
    ),
    "JobCondition": "1 type s; 2 status s; 3 lastProbeTime t; 4 lastTransitionTime t; 5 reason s; 6 message s",
    "UncountedTerminatedPods": "1 succeeded s*; 2 failed s*",
    "CronJob": "1 metadata ObjectMeta; 2 spec CronJobSpec; 3 status CronJobStatus",
    "CronJobSpec": (
        "1 schedule s; 2 startingDeadlineSeconds i; 3 concurrencyPolicy s; 4 suspend b; "
        "5 jobTemplate JobTemplateSpec; 6 successfulJobsHistoryLimit i; 7 failedJobsHistoryLimit i; "
        "8 timeZone s"
    ),
    "JobTemplateSpec": "1 metadata ObjectMeta; 2 spec JobSpec",
    "CronJobStatus": "1 active ObjectReference*; 4 lastScheduleTime t; 5 lastSuccessfulTime t",
    "Deployment": "1 metadata ObjectMeta; 2 spec DeploymentSpec; 3 status DeploymentStatus",
    "DeploymentSpec": (
        "1 replicas i; 2 selector LabelSelector; 3 template PodTemplateSpec; 4 strategy DeploymentStrategy; "
        "5 minReadySeconds i; 6 revisionHistoryLimit i; 7 paused b; 9 progressDeadlineSeconds i"
    ),
    "DeploymentStrategy": "1 type s; 2 rollingUpdate RollingUpdateDeployment",
    "RollingUpdateDeployment": "1 maxUnavailable o; 2 maxSurge o",
    "DeploymentStatus": (
        "1 observedGeneration i; 2 replicas i; 3 updatedReplicas i; 4 availableReplicas i; "
        "5 unavailableReplicas i; 6 conditions DeploymentCondition*; 7 readyReplicas i; 8 collisionCount i"
    ),
    "DeploymentCondition": (
        "1 type s; 2 status s; 4 reason s; 5 message s; 6 lastUpdateTime t; 7 lastTransitionTime t"
    ),
    "Pod": "1 metadata ObjectMeta; 2 spec PodSpec; 3 status PodStatus",
    "PodStatus": (
        "1 phase s; 2 conditions PodCondition*; 3 message s; 4 reason s; 5 hostIP s; 6 podIP s; 7 startTime t; "
        "8 containerStatuses ContainerStatus*; 9 qosClass s; 10 initContainerStatuses ContainerStatus*; "
        "11 nominatedNodeName s; 12 podIPs PodIP*; 13 ephemeralContainerStatuses ContainerStatus*"
    ),
    "PodCondition": "1 type s; 2 status s; 3 lastProbeTime t; 4 lastTransitionTime t; 5 reason s; 6 message s",
    "ContainerStatus": (
        "1 name s; 2 state ContainerState; 3 lastState ContainerState; 4 ready b; 5 restartCount i; 6 image s; "
        "7 imageID s; 8 containerID s; 9 started b"
    ),
    "ContainerState": (
        "1 waiting ContainerStateWaiting; 2 running ContainerStateRunning; "
        "3 terminated ContainerStateTerminated"
    ),
    "ContainerStateWaiting": "1 reason s; 2 message s",
    "ContainerStateRunning": "1 startedAt t",
    "ContainerStateTerminated": (
        "1 exitCode i; 2 signal i; 3 reason s; 4 message s; 5 startedAt t; 6 finishedAt t; 7 containerID s"
    ),
    "PodIP": "1 ip s",
    "PersistentVolumeClaim": (
        "1 metadata ObjectMeta; 2 spec PersistentVolumeClaimSpec; 3 status PersistentVolumeClaimStatus"
    ),
    "PersistentVolumeClaimStatus": (
        "1 phase s; 2 accessModes s*; 3 capacity map:q; 4 conditions PersistentVolumeClaimCondition*; "
        "5 allocatedResources map:q; 6 resizeStatus s"
    ),
    "PersistentVolumeClaimCondition": (
        "1 type s; 2 status s; 3 lastProbeTime t; 4 lastTransitionTime t; 5 reason s; 6 message s"
    ),
}


def _unsupported(what: str) -> ApiError:
    return ApiError(415, "UnsupportedMediaType", f"the simulated cluster cannot decode this protobuf body ({what}); "
                                                 "send it as application/json")


@cache
def _fields(message: str) -> dict[int, tuple[str, str, bool]]:
    """field number -> (JSON name, type, repeated) of ``message``."""
    spec = (_META_SCHEMAS.get(message) or _RBAC_SCHEMAS.get(message) or _REVIEW_SCHEMAS.get(message)
            or _SCHEMAS.get(message))
    if spec is None:
        raise _unsupported(f"message {message}")
    fields = {}
    for entry in spec.split(";"):
        number, name, kind = entry.split()
        fields[int(number)] = (name, kind.rstrip("*"), kind.endswith("*"))
    return fields


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise _unsupported("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _wire_fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of one message, in order."""
    fields, position = [], 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        value: int | bytes
        if wire_type == 0:
            value, position = _varint(data, position)
        elif wire_type == 2:
            length, position = _varint(data, position)
            value, position = data[position:position + length], position + length
        elif wire_type == 1:
            value, position = data[position:position + 8], position + 8
        elif wire_type == 5:
            value, position = data[position:position + 4], position + 4
        else:
            raise _unsupported(f"wire type {wire_type}")
        fields.append((number, wire_type, value))
    return fields


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, wire_type: int, value: Any) -> Any:
    if kind == "s":
        return value.decode("utf-8", errors="replace")
    if kind == "i":
        return _signed(value)
    if kind == "b":
        return bool(value)
    if kind == "y":
        return base64.b64encode(value).decode()
    if kind == "d":
        return struct.unpack("<d", value)[0] if wire_type == 1 else struct.unpack("<f", value)[0]
    if kind == "q":  # resource.Quantity {1 string}
        return next((v.decode() for n, _w, v in _wire_fields(value) if n == 1), "0")
    if kind == "o":  # intstr.IntOrString {1 type, 2 intVal, 3 strVal}
        parts = {n: v for n, _w, v in _wire_fields(value)}
        return parts.get(3, b"").decode() if parts.get(1) == 1 else _signed(parts.get(2, 0))
    if kind == "t":  # metav1.Time {1 seconds, 2 nanos}
        parts = {n: v for n, _w, v in _wire_fields(value)}
        seconds = _signed(parts.get(1, 0))
        return None if seconds <= 0 else datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return decode_message(kind, value)


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value is False


def decode_message(message: str, data: bytes) -> dict[str, Any]:
    """One protobuf message of the known schemas as a JSON-style dict."""
    fields = _fields(message)
    result: dict[str, Any] = {}
    for number, wire_type, value in _wire_fields(data):
        if number not in fields:
            continue  # a field newer than the schema: left out, as the apiserver drops unknown fields
        name, kind, repeated = fields[number]
        if kind.startswith("map:"):
            entry = {n: v for n, w, v in _wire_fields(value)}
            value_kind = kind[4:]
            key = entry.get(1, b"").decode()
            mapped = _scalar(value_kind, 2, entry[2]) if 2 in entry else ("" if value_kind in ("s", "y") else {})
            result.setdefault(name, {})[key] = mapped
        elif repeated:
            items = result.setdefault(name, [])
            if kind in ("i", "b") and wire_type == 2:  # packed
                position = 0
                while position < len(value):
                    item, position = _varint(value, position)
                    items.append(_scalar(kind, 0, item))
            else:
                items.append(_scalar(kind, wire_type, value))
        else:
            decoded = _scalar(kind, wire_type, value)
            if not _is_empty(decoded) and not (message == "ObjectMeta" and name == "generation" and decoded == 0):
                result[name] = decoded
    return result


def decode_object(body: bytes) -> dict[str, Any]:
    """A ``k8s\\0``-framed protobuf body as the JSON object the apiserver would have decoded."""
    if not body.startswith(MAGIC):
        raise ApiError(400, "BadRequest", "the protobuf body does not start with the Kubernetes magic number")
    envelope = {n: v for n, _w, v in _wire_fields(body[len(MAGIC):])}
    type_meta = {n: v.decode() for n, _w, v in _wire_fields(envelope.get(1, b""))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    if envelope.get(3):
        raise _unsupported(f"content encoding {envelope[3].decode()}")
    group = api_version.rpartition("/")[0]
    message = ROOT_MESSAGES.get((group, kind))
    if message is None:
        raise _unsupported(f"kind {kind} of {api_version or 'no API version'}")
    return {"apiVersion": api_version, "kind": kind, **decode_message(message, envelope.get(2, b""))}
