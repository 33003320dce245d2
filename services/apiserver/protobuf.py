"""Kubernetes protobuf request bodies, decoded into the JSON dicts the JSON path produces.

Why: kubectl 1.32+ sends the body of its typed-client commands (``create namespace``, ``create
deployment``, ``create job|cronjob|pdb``, ``create service``, ``create
role|clusterrole|rolebinding|clusterrolebinding``, ``debug node/…``, ``debug --copy-to``,
``autoscale`` — autoscaling/v1 up to 1.32) as ``application/vnd.kubernetes.protobuf``.
client-go has no fallback to JSON after a 415 (it falls back only from CBOR, behind a feature gate
that is off), so an apiserver that cannot read protobuf cannot serve those commands at all.

What it owns:
* ``decode_object(body)``: the envelope (``k8s\\x00`` + ``runtime.Unknown`` carrying apiVersion,
  kind and the object's bytes) and the object itself, returned as the dict Go's JSON encoding of the
  same object would give, so defaulting and validation run unchanged.
* A generic wire-format reader (varint, fixed64, length-delimited, fixed32; packed or unpacked
  repeated scalars) driven by ``_MESSAGES``: one line per Go type, ``number name type``.
* Go's JSON conventions: non-pointer scalars at their zero value are omitted (``omitempty``) unless
  marked ``!`` (no ``omitempty``: ``containerPort``, ``name`` ...); pointer scalars (``?``) keep an
  explicit zero (``replicas: 0``, ``terminationGracePeriodSeconds: 0``); embedded structs (``^``)
  are inlined; ``Time`` becomes RFC 3339 (zero -> omitted), ``MicroTime`` RFC 3339 with
  microseconds, ``Quantity`` its string, ``IntOrString`` an int or a string; present empty messages
  stay ``{}`` as Go prints them (``resources: {}``, ``status: {}``).

Limits: only the kinds kubelite serves (``decodable_kinds()``); another kind is a 415. Fields not in
the table (volume plug-ins for clouds, DRA, very new fields) are skipped and logged at DEBUG, so
such a field is silently lost, as an old apiserver drops fields it does not know. Strings that are
not UTF-8 are decoded with U+FFFD, as Go's JSON encoder would print them. Truncated or mistyped
fields are a 400. Responses are never protobuf: clients that prefer it accept JSON.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from api.errors import BadRequest, UnsupportedMediaType

__all__ = ["CONTENT_TYPE", "MAGIC", "decodable_kinds", "decode_object"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
"""Every Kubernetes protobuf body starts with these four bytes, then a ``runtime.Unknown``."""

# fmt: off
_MESSAGES: dict[str, str] = {
    # --- meta/v1 -------------------------------------------------------------------------------
    "ObjectMeta": "1 name str; 2 generateName str; 3 namespace str; 4 selfLink str; 5 uid str;"
        " 6 resourceVersion str; 7 generation i64; 8 creationTimestamp Time;"
        " 9 deletionTimestamp Time; 10 deletionGracePeriodSeconds ?i64; 11 labels {str};"
        " 12 annotations {str}; 13 ownerReferences *OwnerReference; 14 finalizers *str;"
        " 17 managedFields *ManagedFieldsEntry",
    "OwnerReference": "5 apiVersion !str; 1 kind !str; 3 name !str; 4 uid !str;"
        " 6 controller ?bool; 7 blockOwnerDeletion ?bool",
    "ManagedFieldsEntry": "1 manager str; 2 operation str; 3 apiVersion str; 4 time Time;"
        " 6 fieldsType str; 7 fieldsV1 FieldsV1; 8 subresource str",
    "LabelSelector": "1 matchLabels {str}; 2 matchExpressions *LabelSelectorRequirement",
    "LabelSelectorRequirement": "1 key !str; 2 operator !str; 3 values *str",
    "DeleteOptions": "1 gracePeriodSeconds ?i64; 2 preconditions Preconditions;"
        " 3 orphanDependents ?bool; 4 propagationPolicy ?str; 5 dryRun *str;"
        " 6 ignoreStoreReadErrorWithClusterBreakingPotential ?bool",
    "Preconditions": "1 uid ?str; 2 resourceVersion ?str",
    # --- core/v1: Namespace, Binding, ObjectReference -------------------------------------------
    "Namespace": "1 metadata ObjectMeta; 2 spec NamespaceSpec; 3 status NamespaceStatus",
    "NamespaceSpec": "1 finalizers *str",
    "NamespaceStatus": "1 phase str; 2 conditions *NamespaceCondition",
    "NamespaceCondition": "1 type !str; 2 status !str; 4 lastTransitionTime Time; 5 reason str;"
        " 6 message str",
    "Binding": "1 metadata ObjectMeta; 2 target !ObjectReference",
    "ObjectReference": "1 kind str; 2 namespace str; 3 name str; 4 uid str; 5 apiVersion str;"
        " 6 resourceVersion str; 7 fieldPath str",
    "LocalObjectReference": "1 name str",
    # --- core/v1: ConfigMap, Secret, ServiceAccount (kubectl create configmap|secret|sa) ------
    "ConfigMap": "1 metadata ObjectMeta; 4 immutable ?bool; 2 data {str}; 3 binaryData {bytes}",
    "Secret": "1 metadata ObjectMeta; 5 immutable ?bool; 2 data {bytes}; 4 stringData {str};"
        " 3 type str",
    "ServiceAccount": "1 metadata ObjectMeta; 2 secrets *ObjectReference;"
        " 3 imagePullSecrets *LocalObjectReference; 4 automountServiceAccountToken ?bool",
    # --- core/v1: Pod ---------------------------------------------------------------------------
    "Pod": "1 metadata ObjectMeta; 2 spec PodSpec; 3 status PodStatus",
    "PodTemplateSpec": "1 metadata ObjectMeta; 2 spec PodSpec",
    "PodSpec": "1 volumes *Volume; 20 initContainers *Container; 2 containers *Container;"
        " 34 ephemeralContainers *EphemeralContainer; 3 restartPolicy str;"
        " 4 terminationGracePeriodSeconds ?i64; 5 activeDeadlineSeconds ?i64; 6 dnsPolicy str;"
        " 7 nodeSelector {str}; 8 serviceAccountName str; 9 serviceAccount str;"
        " 21 automountServiceAccountToken ?bool; 10 nodeName str; 11 hostNetwork bool;"
        " 12 hostPID bool; 13 hostIPC bool; 27 shareProcessNamespace ?bool;"
        " 14 securityContext PodSecurityContext; 15 imagePullSecrets *LocalObjectReference;"
        " 16 hostname str; 17 subdomain str; 18 affinity Affinity; 19 schedulerName str;"
        " 22 tolerations *Toleration; 23 hostAliases *HostAlias; 24 priorityClassName str;"
        " 25 priority ?i32; 26 dnsConfig PodDNSConfig; 28 readinessGates *PodReadinessGate;"
        " 29 runtimeClassName ?str; 30 enableServiceLinks ?bool; 31 preemptionPolicy ?str;"
        " 32 overhead {Quantity}; 33 topologySpreadConstraints *TopologySpreadConstraint;"
        " 35 setHostnameAsFQDN ?bool; 36 os PodOS; 37 hostUsers ?bool;"
        " 38 schedulingGates *PodSchedulingGate; 39 resourceClaims *PodResourceClaim;"
        " 40 resources ResourceRequirements; 41 hostnameOverride ?str",
    "Container": "1 name !str; 2 image str; 3 command *str; 4 args *str; 5 workingDir str;"
        " 6 ports *ContainerPort; 19 envFrom *EnvFromSource; 7 env *EnvVar;"
        " 8 resources ResourceRequirements; 23 resizePolicy *ContainerResizePolicy;"
        " 24 restartPolicy ?str; 25 restartPolicyRules *ContainerRestartRule;"
        " 9 volumeMounts *VolumeMount; 21 volumeDevices *VolumeDevice; 10 livenessProbe Probe;"
        " 11 readinessProbe Probe; 22 startupProbe Probe; 12 lifecycle Lifecycle;"
        " 13 terminationMessagePath str; 20 terminationMessagePolicy str;"
        " 14 imagePullPolicy str; 15 securityContext SecurityContext; 16 stdin bool;"
        " 17 stdinOnce bool; 18 tty bool",
    # EphemeralContainerCommon has Container's field numbers; it is embedded, so inlined.
    "EphemeralContainer": "1 ephemeralContainerCommon ^Container; 2 targetContainerName str",
    "ContainerPort": "1 name str; 2 hostPort i32; 3 containerPort !i32; 4 protocol str;"
        " 5 hostIP str",
    "EnvFromSource": "1 prefix str; 2 configMapRef ConfigMapEnvSource;"
        " 3 secretRef SecretEnvSource",
    "ConfigMapEnvSource": "1 localObjectReference ^LocalObjectReference; 2 optional ?bool",
    "SecretEnvSource": "1 localObjectReference ^LocalObjectReference; 2 optional ?bool",
    "EnvVar": "1 name !str; 2 value str; 3 valueFrom EnvVarSource",
    "EnvVarSource": "1 fieldRef ObjectFieldSelector; 2 resourceFieldRef ResourceFieldSelector;"
        " 3 configMapKeyRef ConfigMapKeySelector; 4 secretKeyRef SecretKeySelector;"
        " 5 fileKeyRef FileKeySelector",
    "ObjectFieldSelector": "1 apiVersion str; 2 fieldPath !str",
    "ResourceFieldSelector": "1 containerName str; 2 resource !str; 3 divisor Quantity",
    "ConfigMapKeySelector": "1 localObjectReference ^LocalObjectReference; 2 key !str;"
        " 3 optional ?bool",
    "SecretKeySelector": "1 localObjectReference ^LocalObjectReference; 2 key !str;"
        " 3 optional ?bool",
    "FileKeySelector": "1 volumeName !str; 2 path !str; 3 key !str; 4 optional ?bool",
    "ResourceRequirements": "1 limits {Quantity}; 2 requests {Quantity}; 3 claims *ResourceClaim",
    "ResourceClaim": "1 name !str; 2 request str",
    "ContainerResizePolicy": "1 resourceName !str; 2 restartPolicy !str",
    "ContainerRestartRule": "1 action str; 2 exitCodes ContainerRestartRuleOnExitCodes",
    "ContainerRestartRuleOnExitCodes": "1 operator str; 2 values *i32",
    "VolumeMount": "1 name !str; 2 readOnly bool; 7 recursiveReadOnly ?str; 3 mountPath !str;"
        " 4 subPath str; 5 mountPropagation ?str; 6 subPathExpr str",
    "VolumeDevice": "1 name !str; 2 devicePath !str",
    "Probe": "1 handler ^ProbeHandler; 2 initialDelaySeconds i32; 3 timeoutSeconds i32;"
        " 4 periodSeconds i32; 5 successThreshold i32; 6 failureThreshold i32;"
        " 7 terminationGracePeriodSeconds ?i64",
    "ProbeHandler": "1 exec ExecAction; 2 httpGet HTTPGetAction; 3 tcpSocket TCPSocketAction;"
        " 4 grpc GRPCAction",
    "ExecAction": "1 command *str",
    "HTTPGetAction": "1 path str; 2 port !IntOrString; 3 host str; 4 scheme str;"
        " 5 httpHeaders *HTTPHeader",
    "HTTPHeader": "1 name !str; 2 value !str",
    "TCPSocketAction": "1 port !IntOrString; 2 host str",
    "GRPCAction": "1 port !i32; 2 service ?str",
    "Lifecycle": "1 postStart LifecycleHandler; 2 preStop LifecycleHandler; 3 stopSignal ?str",
    "LifecycleHandler": "1 exec ExecAction; 2 httpGet HTTPGetAction;"
        " 3 tcpSocket TCPSocketAction; 4 sleep SleepAction",
    "SleepAction": "1 seconds !i64",
    "SecurityContext": "1 capabilities Capabilities; 2 privileged ?bool;"
        " 3 seLinuxOptions SELinuxOptions; 10 windowsOptions WindowsSecurityContextOptions;"
        " 4 runAsUser ?i64; 8 runAsGroup ?i64; 5 runAsNonRoot ?bool;"
        " 6 readOnlyRootFilesystem ?bool; 7 allowPrivilegeEscalation ?bool; 9 procMount ?str;"
        " 11 seccompProfile SeccompProfile; 12 appArmorProfile AppArmorProfile",
    "Capabilities": "1 add *str; 2 drop *str",
    "SELinuxOptions": "1 user str; 2 role str; 3 type str; 4 level str",
    "WindowsSecurityContextOptions": "1 gmsaCredentialSpecName ?str; 2 gmsaCredentialSpec ?str;"
        " 3 runAsUserName ?str; 4 hostProcess ?bool",
    "SeccompProfile": "1 type !str; 2 localhostProfile ?str",
    "AppArmorProfile": "1 type !str; 2 localhostProfile ?str",
    "PodSecurityContext": "1 seLinuxOptions SELinuxOptions;"
        " 8 windowsOptions WindowsSecurityContextOptions; 2 runAsUser ?i64; 6 runAsGroup ?i64;"
        " 3 runAsNonRoot ?bool; 4 supplementalGroups *i64; 12 supplementalGroupsPolicy ?str;"
        " 5 fsGroup ?i64; 7 sysctls *Sysctl; 9 fsGroupChangePolicy ?str;"
        " 10 seccompProfile SeccompProfile; 11 appArmorProfile AppArmorProfile;"
        " 13 seLinuxChangePolicy ?str",
    "Sysctl": "1 name !str; 2 value !str",
    "Volume": "1 name !str; 2 volumeSource ^VolumeSource",
    # Only the in-tree sources a laptop cluster can mean; cloud plug-ins are skipped.
    "VolumeSource": "1 hostPath HostPathVolumeSource; 2 emptyDir EmptyDirVolumeSource;"
        " 6 secret SecretVolumeSource; 7 nfs NFSVolumeSource;"
        " 10 persistentVolumeClaim PersistentVolumeClaimVolumeSource;"
        " 16 downwardAPI DownwardAPIVolumeSource; 19 configMap ConfigMapVolumeSource;"
        " 26 projected ProjectedVolumeSource; 28 csi CSIVolumeSource; 30 image ImageVolumeSource",
    "HostPathVolumeSource": "1 path !str; 2 type ?str",
    "EmptyDirVolumeSource": "1 medium str; 2 sizeLimit Quantity",
    "SecretVolumeSource": "1 secretName str; 2 items *KeyToPath; 3 defaultMode ?i32;"
        " 4 optional ?bool",
    "ConfigMapVolumeSource": "1 localObjectReference ^LocalObjectReference; 2 items *KeyToPath;"
        " 3 defaultMode ?i32; 4 optional ?bool",
    "KeyToPath": "1 key !str; 2 path !str; 3 mode ?i32",
    "NFSVolumeSource": "1 server !str; 2 path !str; 3 readOnly bool",
    "PersistentVolumeClaimVolumeSource": "1 claimName !str; 2 readOnly bool",
    "DownwardAPIVolumeSource": "1 items *DownwardAPIVolumeFile; 2 defaultMode ?i32",
    "DownwardAPIVolumeFile": "1 path !str; 2 fieldRef ObjectFieldSelector;"
        " 3 resourceFieldRef ResourceFieldSelector; 4 mode ?i32",
    "ProjectedVolumeSource": "1 sources *VolumeProjection; 2 defaultMode ?i32",
    "VolumeProjection": "1 secret SecretProjection; 2 downwardAPI DownwardAPIProjection;"
        " 3 configMap ConfigMapProjection; 4 serviceAccountToken ServiceAccountTokenProjection",
    "SecretProjection": "1 localObjectReference ^LocalObjectReference; 2 items *KeyToPath;"
        " 4 optional ?bool",
    "ConfigMapProjection": "1 localObjectReference ^LocalObjectReference; 2 items *KeyToPath;"
        " 4 optional ?bool",
    "DownwardAPIProjection": "1 items *DownwardAPIVolumeFile",
    "ServiceAccountTokenProjection": "1 audience str; 2 expirationSeconds ?i64; 3 path !str",
    "CSIVolumeSource": "1 driver !str; 2 readOnly ?bool; 3 fsType ?str;"
        " 4 volumeAttributes {str}; 5 nodePublishSecretRef LocalObjectReference",
    "ImageVolumeSource": "1 reference str; 2 pullPolicy str",
    "Toleration": "1 key str; 2 operator str; 3 value str; 4 effect str;"
        " 5 tolerationSeconds ?i64",
    "Affinity": "1 nodeAffinity NodeAffinity; 2 podAffinity PodAffinity;"
        " 3 podAntiAffinity PodAffinity",
    "NodeAffinity": "1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector;"
        " 2 preferredDuringSchedulingIgnoredDuringExecution *PreferredSchedulingTerm",
    "NodeSelector": "1 nodeSelectorTerms *NodeSelectorTerm",
    "NodeSelectorTerm": "1 matchExpressions *NodeSelectorRequirement;"
        " 2 matchFields *NodeSelectorRequirement",
    "NodeSelectorRequirement": "1 key !str; 2 operator !str; 3 values *str",
    "PreferredSchedulingTerm": "1 weight !i32; 2 preference !NodeSelectorTerm",
    # PodAntiAffinity has PodAffinity's shape and numbers.
    "PodAffinity": "1 requiredDuringSchedulingIgnoredDuringExecution *PodAffinityTerm;"
        " 2 preferredDuringSchedulingIgnoredDuringExecution *WeightedPodAffinityTerm",
    "PodAffinityTerm": "1 labelSelector LabelSelector; 2 namespaces *str; 3 topologyKey !str;"
        " 4 namespaceSelector LabelSelector; 5 matchLabelKeys *str; 6 mismatchLabelKeys *str",
    "WeightedPodAffinityTerm": "1 weight !i32; 2 podAffinityTerm !PodAffinityTerm",
    "HostAlias": "1 ip !str; 2 hostnames *str",
    "PodDNSConfig": "1 nameservers *str; 2 searches *str; 3 options *PodDNSConfigOption",
    "PodDNSConfigOption": "1 name str; 2 value ?str",
    "PodReadinessGate": "1 conditionType !str",
    "TopologySpreadConstraint": "1 maxSkew !i32; 2 topologyKey !str; 3 whenUnsatisfiable !str;"
        " 4 labelSelector LabelSelector; 5 minDomains ?i32; 6 nodeAffinityPolicy ?str;"
        " 7 nodeTaintsPolicy ?str; 8 matchLabelKeys *str",
    "PodOS": "1 name !str",
    "PodSchedulingGate": "1 name !str",
    "PodResourceClaim": "1 name !str; 3 resourceClaimName ?str; 4 resourceClaimTemplateName ?str",
    "PodStatus": "17 observedGeneration i64; 1 phase str; 2 conditions *PodCondition;"
        " 3 message str; 4 reason str; 11 nominatedNodeName str; 5 hostIP str;"
        " 16 hostIPs *HostIP; 6 podIP str; 12 podIPs *PodIP; 7 startTime Time;"
        " 10 initContainerStatuses *ContainerStatus; 8 containerStatuses *ContainerStatus;"
        " 9 qosClass str; 13 ephemeralContainerStatuses *ContainerStatus; 14 resize str",
    "PodCondition": "1 type !str; 7 observedGeneration i64; 2 status !str; 3 lastProbeTime Time;"
        " 4 lastTransitionTime Time; 5 reason str; 6 message str",
    "HostIP": "1 ip !str",
    "PodIP": "1 ip !str",
    "ContainerStatus": "1 name !str; 2 state ContainerState; 3 lastState ContainerState;"
        " 4 ready !bool; 5 restartCount !i32; 6 image !str; 7 imageID !str; 8 containerID str;"
        " 9 started ?bool; 10 allocatedResources {Quantity}; 11 resources ResourceRequirements;"
        " 15 stopSignal ?str",
    "ContainerState": "1 waiting ContainerStateWaiting; 2 running ContainerStateRunning;"
        " 3 terminated ContainerStateTerminated",
    "ContainerStateWaiting": "1 reason str; 2 message str",
    "ContainerStateRunning": "1 startedAt Time",
    "ContainerStateTerminated": "1 exitCode !i32; 2 signal i32; 3 reason str; 4 message str;"
        " 5 startedAt Time; 6 finishedAt Time; 7 containerID str",
    # --- core/v1: Node, Event, ReplicationController -------------------------------------------
    "Node": "1 metadata ObjectMeta; 2 spec NodeSpec; 3 status NodeStatus",
    "NodeSpec": "1 podCIDR str; 7 podCIDRs *str; 3 providerID str; 4 unschedulable bool;"
        " 5 taints *Taint; 2 externalID str",
    "Taint": "1 key !str; 2 value str; 3 effect !str; 4 timeAdded Time",
    "NodeStatus": "1 capacity {Quantity}; 2 allocatable {Quantity}; 3 phase str;"
        " 4 conditions *NodeCondition; 5 addresses *NodeAddress;"
        " 6 daemonEndpoints NodeDaemonEndpoints; 7 nodeInfo NodeSystemInfo;"
        " 8 images *ContainerImage; 9 volumesInUse *str",
    "NodeCondition": "1 type !str; 2 status !str; 3 lastHeartbeatTime Time;"
        " 4 lastTransitionTime Time; 5 reason str; 6 message str",
    "NodeAddress": "1 type !str; 2 address !str",
    "NodeDaemonEndpoints": "1 kubeletEndpoint DaemonEndpoint",
    "DaemonEndpoint": "1 Port !i32",
    "NodeSystemInfo": "1 machineID !str; 2 systemUUID !str; 3 bootID !str; 4 kernelVersion !str;"
        " 5 osImage !str; 6 containerRuntimeVersion !str; 7 kubeletVersion !str;"
        " 8 kubeProxyVersion !str; 9 operatingSystem !str; 10 architecture !str",
    "ContainerImage": "1 names *str; 2 sizeBytes i64",
    "Event": "1 metadata ObjectMeta; 2 involvedObject !ObjectReference; 3 reason str;"
        " 4 message str; 5 source EventSource; 6 firstTimestamp Time; 7 lastTimestamp Time;"
        " 8 count i32; 9 type str; 10 eventTime MicroTime; 11 series EventSeries; 12 action str;"
        " 13 related ObjectReference; 14 reportingComponent !str; 15 reportingInstance !str",
    "EventSource": "1 component str; 2 host str",
    "EventSeries": "1 count i32; 2 lastObservedTime MicroTime",
    "ReplicationController": "1 metadata ObjectMeta; 2 spec ReplicationControllerSpec;"
        " 3 status ReplicationControllerStatus",
    "ReplicationControllerSpec": "1 replicas ?i32; 4 minReadySeconds i32; 2 selector {str};"
        " 3 template PodTemplateSpec",
    "ReplicationControllerStatus": "1 replicas !i32; 2 fullyLabeledReplicas i32;"
        " 4 readyReplicas i32; 5 availableReplicas i32; 3 observedGeneration i64;"
        " 6 conditions *ReplicaCondition",
    # ReplicationControllerCondition and apps/v1 ReplicaSetCondition share shape and numbers.
    "ReplicaCondition": "1 type !str; 2 status !str; 3 lastTransitionTime Time; 4 reason str;"
        " 5 message str",
    # --- apps/v1 --------------------------------------------------------------------------------
    "Deployment": "1 metadata ObjectMeta; 2 spec DeploymentSpec; 3 status DeploymentStatus",
    "DeploymentSpec": "1 replicas ?i32; 2 selector LabelSelector; 3 template !PodTemplateSpec;"
        " 4 strategy DeploymentStrategy; 5 minReadySeconds i32; 6 revisionHistoryLimit ?i32;"
        " 7 paused bool; 9 progressDeadlineSeconds ?i32",
    "DeploymentStrategy": "1 type str; 2 rollingUpdate RollingUpdateDeployment",
    "RollingUpdateDeployment": "1 maxUnavailable IntOrString; 2 maxSurge IntOrString",
    "DeploymentStatus": "1 observedGeneration i64; 2 replicas i32; 3 updatedReplicas i32;"
        " 7 readyReplicas i32; 4 availableReplicas i32; 5 unavailableReplicas i32;"
        " 9 terminatingReplicas ?i32; 6 conditions *DeploymentCondition; 8 collisionCount ?i32",
    "DeploymentCondition": "1 type !str; 2 status !str; 6 lastUpdateTime Time;"
        " 7 lastTransitionTime Time; 4 reason str; 5 message str",
    "ReplicaSet": "1 metadata ObjectMeta; 2 spec ReplicaSetSpec; 3 status ReplicaSetStatus",
    "ReplicaSetSpec": "1 replicas ?i32; 4 minReadySeconds i32; 2 selector LabelSelector;"
        " 3 template PodTemplateSpec",
    "ReplicaSetStatus": "1 replicas !i32; 2 fullyLabeledReplicas i32; 4 readyReplicas i32;"
        " 5 availableReplicas i32; 7 terminatingReplicas ?i32; 3 observedGeneration i64;"
        " 6 conditions *ReplicaCondition",
    # --- batch/v1 (kubectl create job|cronjob) ---------------------------------------------------
    "Job": "1 metadata ObjectMeta; 2 spec JobSpec; 3 status JobStatus",
    "JobSpec": "1 parallelism ?i32; 2 completions ?i32; 3 activeDeadlineSeconds ?i64;"
        " 11 podFailurePolicy PodFailurePolicy; 16 successPolicy SuccessPolicy;"
        " 7 backoffLimit ?i32; 12 backoffLimitPerIndex ?i32; 13 maxFailedIndexes ?i32;"
        " 4 selector LabelSelector; 5 manualSelector ?bool; 6 template !PodTemplateSpec;"
        " 8 ttlSecondsAfterFinished ?i32; 9 completionMode ?str; 10 suspend ?bool;"
        " 14 podReplacementPolicy ?str; 15 managedBy ?str",
    "PodFailurePolicy": "1 rules *PodFailurePolicyRule",
    "PodFailurePolicyRule": "1 action !str; 2 onExitCodes PodFailurePolicyOnExitCodesRequirement;"
        " 3 onPodConditions *PodFailurePolicyOnPodConditionsPattern",
    "PodFailurePolicyOnExitCodesRequirement": "1 containerName ?str; 2 operator !str;"
        " 3 values *i32",
    "PodFailurePolicyOnPodConditionsPattern": "1 type !str; 2 status !str",
    "SuccessPolicy": "1 rules *SuccessPolicyRule",
    "SuccessPolicyRule": "1 succeededIndexes ?str; 2 succeededCount ?i32",
    "JobStatus": "1 conditions *JobCondition; 2 startTime Time; 3 completionTime Time;"
        " 4 active i32; 5 succeeded i32; 6 failed i32; 11 terminating ?i32;"
        " 7 completedIndexes str; 10 failedIndexes ?str;"
        " 8 uncountedTerminatedPods UncountedTerminatedPods; 9 ready ?i32",
    "JobCondition": "1 type !str; 2 status !str; 3 lastProbeTime Time;"
        " 4 lastTransitionTime Time; 5 reason str; 6 message str",
    "UncountedTerminatedPods": "1 succeeded *str; 2 failed *str",
    "CronJob": "1 metadata ObjectMeta; 2 spec CronJobSpec; 3 status CronJobStatus",
    "CronJobSpec": "1 schedule !str; 8 timeZone ?str; 2 startingDeadlineSeconds ?i64;"
        " 3 concurrencyPolicy str; 4 suspend ?bool; 5 jobTemplate !JobTemplateSpec;"
        " 6 successfulJobsHistoryLimit ?i32; 7 failedJobsHistoryLimit ?i32",
    "JobTemplateSpec": "1 metadata ObjectMeta; 2 spec JobSpec",
    "CronJobStatus": "1 active *ObjectReference; 4 lastScheduleTime Time;"
        " 5 lastSuccessfulTime Time",
    # --- policy/v1: PodDisruptionBudget (kubectl create pdb), Eviction --------------------------
    "PodDisruptionBudget": "1 metadata ObjectMeta; 2 spec PodDisruptionBudgetSpec;"
        " 3 status PodDisruptionBudgetStatus",
    "PodDisruptionBudgetSpec": "1 minAvailable IntOrString; 2 selector LabelSelector;"
        " 3 maxUnavailable IntOrString; 4 unhealthyPodEvictionPolicy ?str",
    "PodDisruptionBudgetStatus": "1 observedGeneration i64; 2 disruptedPods {Time};"
        " 3 disruptionsAllowed !i32; 4 currentHealthy !i32; 5 desiredHealthy !i32;"
        " 6 expectedPods !i32; 7 conditions *Condition",
    "Condition": "1 type !str; 2 status !str; 3 observedGeneration i64;"
        " 4 lastTransitionTime !Time; 5 reason !str; 6 message !str",
    # --- autoscaling/v2: HorizontalPodAutoscaler (kubectl autoscale, 1.33+) ----------------------
    "HorizontalPodAutoscaler": "1 metadata ObjectMeta; 2 spec HorizontalPodAutoscalerSpec;"
        " 3 status HorizontalPodAutoscalerStatus",
    "HorizontalPodAutoscalerSpec": "1 scaleTargetRef CrossVersionObjectReference;"
        " 2 minReplicas ?i32; 3 maxReplicas !i32; 4 metrics *MetricSpec;"
        " 5 behavior HorizontalPodAutoscalerBehavior",
    "CrossVersionObjectReference": "1 kind !str; 2 name !str; 3 apiVersion str",
    "MetricSpec": "1 type !str; 4 resource ResourceMetricSource;"
        " 7 containerResource ContainerResourceMetricSource",
    "ResourceMetricSource": "1 name !str; 2 target MetricTarget",
    "ContainerResourceMetricSource": "1 name !str; 2 target MetricTarget; 3 container !str",
    "MetricTarget": "1 type !str; 2 value Quantity; 3 averageValue Quantity;"
        " 4 averageUtilization ?i32",
    "HorizontalPodAutoscalerBehavior": "1 scaleUp HPAScalingRules; 2 scaleDown HPAScalingRules",
    "HPAScalingRules": "3 stabilizationWindowSeconds ?i32; 1 selectPolicy ?str;"
        " 2 policies *HPAScalingPolicy; 4 tolerance Quantity",
    "HPAScalingPolicy": "1 type !str; 2 value !i32; 3 periodSeconds !i32",
    "HorizontalPodAutoscalerStatus": "1 observedGeneration ?i64; 2 lastScaleTime Time;"
        " 3 currentReplicas i32; 4 desiredReplicas !i32",
    # --- autoscaling/v1: HorizontalPodAutoscaler (kubectl autoscale, 1.32 and older) ------------
    "HorizontalPodAutoscalerV1": "1 metadata ObjectMeta; 2 spec HorizontalPodAutoscalerSpecV1;"
        " 3 status HorizontalPodAutoscalerStatusV1",
    "HorizontalPodAutoscalerSpecV1": "1 scaleTargetRef CrossVersionObjectReference;"
        " 2 minReplicas ?i32; 3 maxReplicas !i32; 4 targetCPUUtilizationPercentage ?i32",
    "HorizontalPodAutoscalerStatusV1": "1 observedGeneration ?i64; 2 lastScaleTime Time;"
        " 3 currentReplicas !i32; 4 desiredReplicas !i32; 5 currentCPUUtilizationPercentage ?i32",
    # --- coordination.k8s.io/v1: Lease -----------------------------------------------------------
    "Lease": "1 metadata ObjectMeta; 2 spec LeaseSpec",
    "LeaseSpec": "1 holderIdentity ?str; 2 leaseDurationSeconds ?i32; 3 acquireTime MicroTime;"
        " 4 renewTime MicroTime; 5 leaseTransitions ?i32; 6 strategy ?str;"
        " 7 preferredHolder ?str",
    # --- scheduling.k8s.io/v1: PriorityClass (kubectl create priorityclass) --------------------
    "PriorityClass": "1 metadata ObjectMeta; 2 value !i32; 3 globalDefault bool;"
        " 4 description str; 5 preemptionPolicy ?str",
    # --- core/v1 Service, policy/v1 Eviction, autoscaling/v1 Scale -------------------------------
    "Service": "1 metadata ObjectMeta; 2 spec ServiceSpec; 3 status ServiceStatus",
    "ServiceSpec": "1 ports *ServicePort; 2 selector {str}; 3 clusterIP str; 18 clusterIPs *str;"
        " 4 type str; 5 externalIPs *str; 7 sessionAffinity str; 8 loadBalancerIP str;"
        " 9 loadBalancerSourceRanges *str; 10 externalName str; 11 externalTrafficPolicy str;"
        " 12 healthCheckNodePort i32; 13 publishNotReadyAddresses bool;"
        " 14 sessionAffinityConfig SessionAffinityConfig; 19 ipFamilies *str;"
        " 17 ipFamilyPolicy ?str; 20 allocateLoadBalancerNodePorts ?bool;"
        " 21 loadBalancerClass ?str; 22 internalTrafficPolicy ?str; 23 trafficDistribution ?str",
    "ServicePort": "1 name str; 2 protocol str; 6 appProtocol ?str; 3 port !i32;"
        " 4 targetPort IntOrString; 5 nodePort i32",
    "SessionAffinityConfig": "1 clientIP ClientIPConfig",
    "ClientIPConfig": "1 timeoutSeconds ?i32",
    "ServiceStatus": "1 loadBalancer LoadBalancerStatus; 2 conditions *Condition",
    "LoadBalancerStatus": "1 ingress *LoadBalancerIngress",
    "LoadBalancerIngress": "1 ip str; 2 hostname str; 3 ipMode ?str; 4 ports *PortStatus",
    "PortStatus": "1 port !i32; 2 protocol !str; 3 error ?str",
    "Eviction": "1 metadata ObjectMeta; 2 deleteOptions DeleteOptions",
    "Scale": "1 metadata ObjectMeta; 2 spec ScaleSpec; 3 status ScaleStatus",
    "ScaleSpec": "1 replicas i32",
    "ScaleStatus": "1 replicas !i32; 2 selector str",
    # --- authorization.k8s.io/v1, authentication.k8s.io/v1: the reviews (kubectl auth) -----------
    "SubjectAccessReview": "1 metadata ObjectMeta; 2 spec SubjectAccessReviewSpec",
    "SubjectAccessReviewSpec": "1 resourceAttributes ResourceAttributes;"
        " 2 nonResourceAttributes NonResourceAttributes; 3 user str; 4 groups *str; 6 uid str",
    "SelfSubjectAccessReview": "1 metadata ObjectMeta; 2 spec SelfSubjectAccessReviewSpec",
    "SelfSubjectAccessReviewSpec": "1 resourceAttributes ResourceAttributes;"
        " 2 nonResourceAttributes NonResourceAttributes",
    "ResourceAttributes": "1 namespace str; 2 verb str; 3 group str; 4 version str;"
        " 5 resource str; 6 subresource str; 7 name str",
    "NonResourceAttributes": "1 path str; 2 verb str",
    "SelfSubjectRulesReview": "1 metadata ObjectMeta; 2 spec SelfSubjectRulesReviewSpec",
    "SelfSubjectRulesReviewSpec": "1 namespace str",
    "SelfSubjectReview": "1 metadata ObjectMeta",
    "TokenReview": "1 metadata ObjectMeta; 2 spec TokenReviewSpec",
    "TokenReviewSpec": "1 token str; 2 audiences *str",
    # --- rbac.authorization.k8s.io/v1 (kubectl create role|clusterrole|rolebinding|...) ---------
    "Role": "1 metadata ObjectMeta; 2 rules *PolicyRule",
    "ClusterRole": "1 metadata ObjectMeta; 2 rules *PolicyRule; 3 aggregationRule AggregationRule",
    "PolicyRule": "1 verbs *str; 2 apiGroups *str; 3 resources *str; 4 resourceNames *str;"
        " 5 nonResourceURLs *str",
    "AggregationRule": "1 clusterRoleSelectors *LabelSelector",
    "RoleBinding": "1 metadata ObjectMeta; 2 subjects *Subject; 3 roleRef !RoleRef",
    "Subject": "1 kind !str; 2 apiGroup str; 3 name !str; 4 namespace str",
    "RoleRef": "1 apiGroup !str; 2 kind !str; 3 name !str",
}

_KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "Pod"): "Pod",
    ("v1", "Node"): "Node",
    ("v1", "Event"): "Event",
    ("v1", "ReplicationController"): "ReplicationController",
    ("v1", "Binding"): "Binding",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("v1", "Service"): "Service",
    ("apps/v1", "Deployment"): "Deployment",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("coordination.k8s.io/v1", "Lease"): "Lease",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("autoscaling/v1", "Scale"): "Scale",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "HorizontalPodAutoscaler",
    ("autoscaling/v1", "HorizontalPodAutoscaler"): "HorizontalPodAutoscalerV1",
    ("authorization.k8s.io/v1", "SubjectAccessReview"): "SubjectAccessReview",
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): "SubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("authentication.k8s.io/v1", "TokenReview"): "TokenReview",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "RoleBinding",
}
"""(apiVersion, kind) of an envelope -> the message its raw bytes hold."""
# fmt: on

_SCALARS = frozenset({"str", "bytes", "bool", "i32", "i64"})
_SPECIAL = frozenset({"Time", "MicroTime", "Quantity", "IntOrString", "FieldsV1"})
"""Message types printed as JSON scalars (or, for ``FieldsV1``, as the raw JSON they carry)."""

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_ZERO: dict[str, Any] = {"str": "", "bool": False, "i32": 0, "i64": 0}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MAX_VARINT_BYTES = 10


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    type: str  # a scalar, a special, or a _MESSAGES key
    repeated: bool = False
    map_value: bool = False  # a map<string, type>
    pointer: bool = False  # keep an explicit zero (Go *T)
    always: bool = False  # no omitempty: print the zero value too
    inline: bool = False  # an embedded struct: its fields join the parent's


def _compile(spec: str, *, message: str) -> dict[int, _Field]:
    fields: dict[int, _Field] = {}
    for part in spec.split(";"):
        number, name, type_ = part.split()
        flags = {"pointer": False, "always": False, "repeated": False, "inline": False}
        map_value = type_.startswith("{")
        if map_value:
            type_ = type_.strip("{}")
        while type_[0] in "?!*^":
            key = {"?": "pointer", "!": "always", "*": "repeated", "^": "inline"}[type_[0]]
            flags[key] = True
            type_ = type_[1:]
        if type_ not in _SCALARS and type_ not in _SPECIAL and type_ not in _MESSAGES:
            raise ValueError(f"{message}.{name}: unknown type {type_!r}")
        if int(number) in fields:
            raise ValueError(f"{message}.{name}: field number {number} used twice")
        fields[int(number)] = _Field(name=name, type=type_, map_value=map_value, **flags)
    return fields


_SCHEMA: dict[str, dict[int, _Field]] = {
    name: _compile(spec, message=name) for name, spec in _MESSAGES.items()
}


_ALWAYS: dict[str, tuple[tuple[str, Any], ...]] = {
    name: tuple(
        (f.name, _ZERO[f.type])
        for f in fields.values()
        if f.always and f.type in _ZERO and not (f.repeated or f.map_value)
    )
    for name, fields in _SCHEMA.items()
}
"""Per message, the scalars Go prints even at their zero value, with that value."""


def decodable_kinds() -> frozenset[tuple[str, str]]:
    """The (apiVersion, kind) pairs whose protobuf bodies ``decode_object`` reads."""
    return frozenset(_KINDS)


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the JSON dict of the same object.

    400 ``BadRequest`` for anything malformed (no magic prefix, truncated or mistyped fields, a
    missing kind); 415 ``UnsupportedMediaType`` for a kind without a schema here or an encoded
    (compressed) payload.
    """
    if not body.startswith(MAGIC):
        raise BadRequest("error decoding protobuf body: missing the k8s\\x00 prefix")
    api_version, kind, raw, encoding = _envelope(memoryview(body)[len(MAGIC) :])
    if not kind:
        raise BadRequest("Object 'Kind' is missing in the protobuf body")
    if encoding:
        raise UnsupportedMediaType(f"protobuf content encoding {encoding!r} is not supported")
    message = _KINDS.get((api_version, kind))
    if message is None:
        raise UnsupportedMediaType(
            f"kubelite cannot decode {api_version} {kind} from protobuf; send it as JSON"
        )
    obj: dict[str, Any] = {"kind": kind, "apiVersion": api_version}
    obj.update(_message(raw, message=message, path=""))
    return obj


def _envelope(buf: memoryview) -> tuple[str, str, memoryview, str]:
    """``runtime.Unknown``: 1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding."""
    api_version = kind = encoding = ""
    raw = memoryview(b"")
    for number, wire, value in _fields(buf, path="<envelope>"):
        if number == 1 and wire == _LENGTH:
            assert isinstance(value, memoryview)
            for sub, sub_wire, sub_value in _fields(value, path="typeMeta"):
                if sub in (1, 2) and sub_wire == _LENGTH:
                    assert isinstance(sub_value, memoryview)
                    text = _text(sub_value)
                    api_version, kind = (text, kind) if sub == 1 else (api_version, text)
        elif number == 2 and wire == _LENGTH:
            assert isinstance(value, memoryview)
            raw = value
        elif number == 3 and wire == _LENGTH:
            assert isinstance(value, memoryview)
            encoding = _text(value)
    return api_version, kind, raw, encoding


def _fields(buf: memoryview, *, path: str) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) for each field: an int, or the bytes of a LEN field."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos, path=path)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _malformed(path, "field number 0")
        if wire == _VARINT:
            value, pos = _varint(buf, pos, path=path)
            yield number, wire, value
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if pos + size > end:
                raise _malformed(path, "truncated fixed-width field")
            yield number, wire, int.from_bytes(buf[pos : pos + size], "little")
            pos += size
        elif wire == _LENGTH:
            length, pos = _varint(buf, pos, path=path)
            if pos + length > end:
                raise _malformed(path, "length-delimited field runs past the end of its message")
            yield number, wire, buf[pos : pos + length]
            pos += length
        else:
            raise _malformed(path, f"unsupported wire type {wire}")


def _varint(buf: memoryview, pos: int, *, path: str) -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:  # most keys, lengths and numbers: one byte
        return buf[pos], pos + 1
    value = shift = 0
    for i in range(_MAX_VARINT_BYTES):
        if pos + i >= len(buf):
            raise _malformed(path, "truncated varint")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + i + 1
        shift += 7
    raise _malformed(path, "varint longer than 10 bytes")


def _message(buf: memoryview, *, message: str, path: str) -> dict[str, Any]:
    schema = _SCHEMA[message]
    out: dict[str, Any] = {}
    for number, wire, value in _fields(buf, path=path or message):
        field = schema.get(number)
        if field is None:
            log.debug("protobuf body: skipped unknown field %d of %s at %s", number, message, path)
            continue
        where = f"{path}.{field.name}" if path else field.name
        if field.map_value:
            key, item = _map_entry(_expect_length(value, wire, where), field=field, path=where)
            out.setdefault(field.name, {})[key] = item
        elif field.repeated:
            out.setdefault(field.name, []).extend(_repeated(value, wire, field=field, path=where))
        elif field.inline:
            out.update(_message(_expect_length(value, wire, where), message=field.type, path=path))
        else:
            item = _single(value, wire, field=field, path=where)
            if _omitted(item, field=field):
                out.pop(field.name, None)  # the last occurrence wins, even a zero one
            elif isinstance(item, dict) and isinstance(out.get(field.name), dict):
                out[field.name].update(item)  # protobuf merges a repeated singular message
            else:
                out[field.name] = item
    for name, zero in _ALWAYS[message]:
        out.setdefault(name, zero)
    return out


def _omitted(value: Any, *, field: _Field) -> bool:
    """Go's ``omitempty`` for what was decoded: zero non-pointer scalars and zero times go."""
    if value is None:
        return True
    if field.pointer or field.always or field.repeated or field.map_value:
        return False
    if field.type in _ZERO or field.type == "bytes":
        return not value
    return False


def _repeated(value: int | memoryview, wire: int, *, field: _Field, path: str) -> list[Any]:
    if field.type in ("bool", "i32", "i64") and wire == _LENGTH:
        assert isinstance(value, memoryview)
        packed: list[Any] = []
        pos = 0
        while pos < len(value):
            number, pos = _varint(value, pos, path=path)
            packed.append(_scalar(number, field.type))
        return packed
    return [_single(value, wire, field=field, path=f"{path}[]")]


def _map_entry(buf: memoryview, *, field: _Field, path: str) -> tuple[str, Any]:
    """A map entry message: 1 key (string), 2 value. Absent parts are their zero values."""
    key = ""
    item: Any = _ZERO.get(field.type, "" if field.type in ("Quantity", "bytes") else {})
    for number, wire, value in _fields(buf, path=path):
        if number == 1:
            key = _text(_expect_length(value, wire, path))
        elif number == 2:
            item = _single(value, wire, field=field, path=f"{path}[{key}]")
    return key, item


def _single(value: int | memoryview, wire: int, *, field: _Field, path: str) -> Any:
    type_ = field.type
    if type_ in ("bool", "i32", "i64"):
        if wire != _VARINT:
            raise _malformed(path, f"expected a varint, found wire type {wire}")
        assert isinstance(value, int)
        return _scalar(value, type_)
    buf = _expect_length(value, wire, path)
    if type_ == "str":
        return _text(buf)
    if type_ == "bytes":
        return base64.b64encode(buf).decode()
    if type_ in _SPECIAL:
        return _special(buf, type_=type_, path=path)
    return _message(buf, message=type_, path=path)


def _scalar(value: int, type_: str) -> bool | int:
    if type_ == "bool":
        return value != 0
    if type_ == "i32":  # Go accumulates into an int32: keep the low 32 bits, signed
        value &= 0xFFFFFFFF
        return value - (1 << 32) if value >= 1 << 31 else value
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _special(buf: memoryview, *, type_: str, path: str) -> Any:
    parts: dict[int, int | memoryview] = {}
    for number, wire, value in _fields(buf, path=path):
        if wire not in (_VARINT, _LENGTH):
            raise _malformed(path, f"unexpected wire type {wire} in a {type_}")
        parts[number] = value
    if type_ in ("Time", "MicroTime"):
        if not buf:  # a zero time: Go prints null, and nulls are not kept
            return None
        return _time(_int(parts.get(1, 0), path), _int(parts.get(2, 0), path), type_, path)
    if type_ == "Quantity":
        return _text(_bytes(parts.get(1, memoryview(b"")), path))
    if type_ == "IntOrString":
        if _int(parts.get(1, 0), path) == 1:
            return _text(_bytes(parts.get(3, memoryview(b"")), path))
        return _scalar(_int(parts.get(2, 0), path), "i32")
    raw = bytes(_bytes(parts.get(1, memoryview(b"")), path))  # FieldsV1: JSON bytes
    try:
        return json.loads(raw) if raw else {}
    except ValueError as exc:
        raise _malformed(path, f"fieldsV1 is not JSON: {exc}") from None


def _time(seconds: int, nanos: int, type_: str, path: str) -> str:
    seconds, nanos = _scalar(seconds, "i64"), _scalar(nanos, "i32")
    try:
        moment = _EPOCH + datetime.timedelta(seconds=seconds)
    except OverflowError:
        raise _malformed(path, f"time {seconds}s is out of range") from None
    if type_ == "Time":  # metav1.Time prints whole seconds
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{max(nanos, 0) // 1000:06d}Z"


def _int(value: int | memoryview, path: str) -> int:
    if not isinstance(value, int):
        raise _malformed(path, "expected a varint")
    return value


def _bytes(value: int | memoryview, path: str) -> memoryview:
    if not isinstance(value, memoryview):
        raise _malformed(path, "expected a length-delimited field")
    return value


def _expect_length(value: int | memoryview, wire: int, path: str) -> memoryview:
    if wire != _LENGTH or not isinstance(value, memoryview):
        raise _malformed(path, f"expected a length-delimited field, found wire type {wire}")
    return value


def _text(buf: memoryview) -> str:
    return bytes(buf).decode("utf-8", errors="replace")


def _malformed(path: str, problem: str) -> BadRequest:
    return BadRequest(f"error decoding protobuf body at {path}: {problem}")
