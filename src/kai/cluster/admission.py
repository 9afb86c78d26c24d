"""What kai's admission webhooks decide: which Queues, PodGroups and pods the API server may store, and
what a GPU-sharing pod gets added at creation. Pure: the Kubernetes adapter serves it
(`kai.kubernetes.webhook`).

Every rule is the one kai already applies when it reads an object (`kai.api`): a manifest `kai sim`
refuses is refused at admission with the same words, naming the field (for a pod, the annotation).
On top of that, what only a cluster can tell:
* a Queue's parent must exist, and a Queue may not close a loop of parents;
* a pod may ask for part of a GPU only where GPU sharing is on (`--gpu-sharing`, the chart's
  `global.gpuSharing`); the refusal says how to turn it on.

The mutation of a GPU-sharing pod is KAI's: an annotation `runai/shared-gpu-configmap` naming the
pod's ConfigMap, and env references in the container that gets the fraction, so its
`NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` and `RUNAI_NUM_OF_GPUS` come from that ConfigMap, which kai
writes before binding the pod (`kai.kubernetes.shared_binds`); `runtimeClassName` when configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api import pod as api_pod
from kai.api import queue as api_queue
from kai.api.errors import InputError
from kai.api.fields import Reader
from kai.api.podgroup import parse_podgroup
from kai.cluster import gpu_sharing as sharing

CONFIGMAP_SUFFIX = "shared-gpu"
MAX_BASE = 63 - len(CONFIGMAP_SUFFIX) - 7 - 2 - 5 - 4  # KAI's bound, so "<base>-<i>-evar-vol" names stay valid


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """Admit (`allowed`) or refuse with `message`; `patch` is a JSON patch for a mutation."""

    allowed: bool
    message: str = ""
    patch: tuple[Mapping[str, Any], ...] = ()


ALLOW = Verdict(allowed=True)


def _refused(err: InputError) -> Verdict:
    return Verdict(allowed=False, message=f"{err.field}: {err.problem}" if err.field else err.problem)


# ------------------------------------------------------------------------------------------ Queues
def review_queue(obj: Mapping[str, Any], *, queues: Mapping[str, api_queue.Queue]) -> Verdict:
    """A Queue as kai reads it (`spec.resources` present, numbers as KAI's CRD types them), whose
    parent exists (among `queues`, the cluster's other queues) and which closes no loop of parents."""
    try:
        queue = api_queue.parse_queue(obj, source=None)
    except InputError as err:
        return _refused(err)
    if queue.parent is not None and queue.parent not in queues:
        return Verdict(
            allowed=False,
            message=(
                f'spec.parentQueue: queue "{queue.parent}" does not exist; create the parent queue first, or name '
                "an existing queue"
            ),
        )
    others = [q for name, q in queues.items() if name != queue.name]
    for cycle in api_queue.parent_cycles([*others, queue]):
        if queue.name in cycle:
            return Verdict(allowed=False, message=f"spec.parentQueue: {api_queue.cycle_problem(cycle)}")
    return ALLOW


# ------------------------------------------------------------------------------------------ PodGroups
def review_podgroup(obj: Mapping[str, Any]) -> Verdict:
    """A PodGroup as kai reads it: minMember at least 1, subgroup names unique, parents that exist and
    form no loop, minSubGroup within the children there are."""
    try:
        parse_podgroup(obj, source=None)
    except InputError as err:
        return _refused(err)
    return ALLOW


# ------------------------------------------------------------------------------------------ pods
def asks_for_gpu_share(obj: Mapping[str, Any]) -> bool:
    """Whether a pod asks for part of a GPU (a non-empty gpu-fraction or gpu-memory annotation)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return bool(annotations.get(api_pod.GPU_FRACTION) or annotations.get(api_pod.GPU_MEMORY))


def ours(obj: Mapping[str, Any], scheduler_name: str) -> bool:
    """Whether kai schedules the pod (only such pods are reviewed and mutated)."""
    return (obj.get("spec") or {}).get("schedulerName") == scheduler_name


def review_pod(obj: Mapping[str, Any], *, scheduler_name: str, gpu_sharing: bool) -> Verdict:
    """A pod's GPU-sharing annotations: valid values and combinations, and sharing switched on."""
    if not ours(obj, scheduler_name):
        return ALLOW
    meta = obj.get("metadata") or {}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    name = str(meta.get("name") or meta.get("generateName") or "")
    reader = Reader(obj, source=None, kind="Pod", name=name)
    if asks_for_gpu_share(obj) and not gpu_sharing:
        which = api_pod.GPU_FRACTION if annotations.get(api_pod.GPU_FRACTION) else api_pod.GPU_MEMORY
        return Verdict(
            allowed=False,
            message=(
                f"metadata.annotations.{which}: GPU sharing is off on this cluster, so a pod cannot ask for part of "
                "a GPU; turn it on with `helm upgrade kai deploy/helm/kai -n kai-scheduler --reuse-values --set "
                "global.gpuSharing=true` (kai run --gpu-sharing), or request whole GPUs with nvidia.com/gpu"
            ),
        )
    try:
        requests = api_pod.parse_pod_spec_requests(reader.child("spec"))
        api_pod.parse_gpu_share(annotations, requests, reader)
    except InputError as err:
        return _refused(err)
    return ALLOW


def configmap_base(obj: Mapping[str, Any], *, suffix: str) -> str:
    """The name KAI's admission gives a shared pod's ConfigMaps: the owner's (else the pod's) name, a
    random `suffix` (7 characters) and `shared-gpu`."""
    meta = obj.get("metadata") or {}
    owners = meta.get("ownerReferences") or ()
    base = str((owners[0] or {}).get("name") if owners else meta.get("name") or meta.get("generateName") or "pod")
    base = base.rstrip("-")[:MAX_BASE].rstrip("-.") or "pod"
    return f"{base}-{suffix}-{CONFIGMAP_SUFFIX}"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def mutate_pod(obj: Mapping[str, Any], *, scheduler_name: str, suffix: str, runtime_class: str | None) -> Verdict:
    """The JSON patch that gives a GPU-sharing pod its device settings (nothing for other pods)."""
    if not ours(obj, scheduler_name) or not asks_for_gpu_share(obj):
        return ALLOW
    container = sharing.fraction_container(obj)
    if container is None:
        return ALLOW  # the validating webhook refuses the pod, naming the annotation
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    base = str(annotations.get(sharing.CONFIGMAP_ANNOTATION) or configmap_base(obj, suffix=suffix))
    configmap = sharing.capabilities_configmap(base, container)
    patch: list[Mapping[str, Any]] = []
    if sharing.CONFIGMAP_ANNOTATION not in annotations:
        path = f"/metadata/annotations/{_escape(sharing.CONFIGMAP_ANNOTATION)}"
        patch.append({"op": "add", "path": path, "value": base})
    spec = obj.get("spec") or {}
    key = "initContainers" if container.init else "containers"
    current = [e for e in ((spec.get(key) or [])[container.index].get("env") or ())]
    env = [e for e in current if e.get("name") not in sharing.DEVICE_ENV_KEYS]
    env += [
        {"name": name, "valueFrom": {"configMapKeyRef": {"name": configmap, "key": name}}}
        for name in sharing.DEVICE_ENV_KEYS
    ]
    if env != current:
        patch.append({"op": "add", "path": f"/spec/{key}/{container.index}/env", "value": env})
    if runtime_class and not spec.get("runtimeClassName"):
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": runtime_class})
    return Verdict(allowed=True, patch=tuple(patch))
