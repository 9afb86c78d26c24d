"""Manifests: YAML or JSON text in, typed objects out, the way `kubectl apply -f` reads them.

Parsing is pure (text in, objects out); reading files is the caller's job. A `v1 List` is
unpacked into its items. Workload kinds whose controllers the simulator emulates are kept as
`Workload` (their metadata parsed, the body raw) for the controllers and the pod grouper.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from kai.api.errors import InputError, Source
from kai.api.meta import ObjectMeta, read_meta
from kai.api.node import Node, parse_node
from kai.api.pod import Pod, parse_pod
from kai.api.podgroup import PodGroup, parse_podgroup
from kai.api.priority import PriorityClass, parse_priority_class
from kai.api.queue import Queue, parse_queue

# group/Kind of workloads with emulated controllers; value: namespaced
WORKLOAD_KINDS: frozenset[str] = frozenset(
    {
        "apps/Deployment",
        "apps/ReplicaSet",
        "apps/StatefulSet",
        "batch/Job",
        "batch/CronJob",
        "ray.io/RayCluster",
        "ray.io/RayJob",
        "ray.io/RayService",
        "kubeflow.org/PyTorchJob",
        "kubeflow.org/TFJob",
        "kubeflow.org/MPIJob",
        "kubeflow.org/XGBoostJob",
        "kubeflow.org/JAXJob",
        "kubeflow.org/Notebook",
        "jobset.x-k8s.io/JobSet",
        "leaderworkerset.x-k8s.io/LeaderWorkerSet",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    """A controller-managed object (Deployment, RayCluster, PyTorchJob, ...): metadata plus raw body."""

    meta: ObjectMeta
    api_version: str
    kind: str
    raw: Mapping[str, Any]
    source: Source | None

    @property
    def group_kind(self) -> str:
        return f"{group_of(self.api_version)}/{self.kind}"

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, kw_only=True, slots=True)
class Namespace:
    meta: ObjectMeta


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigMap:
    meta: ObjectMeta
    data: Mapping[str, str]


ApiObject = Node | Pod | PodGroup | Queue | PriorityClass | Namespace | ConfigMap | Workload


@dataclass(frozen=True, kw_only=True, slots=True)
class Document:
    """One raw object and where it came from."""

    raw: Mapping[str, Any]
    source: Source


@dataclass(frozen=True, kw_only=True, slots=True)
class SkippedObject:
    """An object of a kind kai does not understand; reported to the user, never silently dropped."""

    source: Source
    api_version: str
    kind: str
    name: str


def group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def split_documents(text: str, *, file: str) -> Iterator[Document]:
    """The objects in one file's text: JSON if the file ends in .json, else multi-document YAML."""
    try:
        if file.endswith(".json"):
            loaded: list[Any] = [json.loads(text)]
        else:
            loaded = list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InputError(
            source=None, kind="file", name=file, field="", problem=f"is not valid YAML/JSON: {exc}"
        ) from None
    index = 0
    for doc in loaded:
        if doc is None:
            continue
        index += 1
        source = Source(file=file, index=index)
        if not isinstance(doc, Mapping):
            raise InputError(source=source, kind="document", name="", field="", problem="must be a mapping")
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item in doc["items"]:
                if not isinstance(item, Mapping):
                    raise InputError(
                        source=source, kind="List", name="", field="items", problem="must hold mappings"
                    )
                yield Document(raw=item, source=source)
            continue
        yield Document(raw=doc, source=source)


def parse_document(doc: Document) -> ApiObject | SkippedObject:
    """The typed object for one document, or a SkippedObject for a kind kai does not know."""
    raw, source = doc.raw, doc.source
    api_version = raw.get("apiVersion")
    kind = raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(source=source, kind="object", name="", field="kind", problem="is missing")
    if not isinstance(api_version, str) or not api_version:
        raise InputError(source=source, kind=kind, name="", field="apiVersion", problem="is missing")
    group = group_of(api_version)
    if group == "" and kind == "Pod":
        return parse_pod(raw, source=source)
    if group == "" and kind == "Node":
        return parse_node(raw, source=source)
    if group == "scheduling.run.ai" and kind == "Queue":
        return parse_queue(raw, source=source)
    if group == "scheduling.run.ai" and kind == "PodGroup":
        return parse_podgroup(raw, source=source)
    if group == "scheduling.k8s.io" and kind == "PriorityClass":
        return parse_priority_class(raw, source=source)
    if group == "" and kind == "Namespace":
        return Namespace(meta=read_meta(raw, source=source, kind=kind, namespaced=False))
    if group == "" and kind == "ConfigMap":
        data = raw.get("data") or {}
        if not isinstance(data, Mapping):
            raise InputError(source=source, kind=kind, name="", field="data", problem="must be a mapping")
        meta = read_meta(raw, source=source, kind=kind, namespaced=True)
        return ConfigMap(meta=meta, data={str(k): str(v) for k, v in data.items()})
    if f"{group}/{kind}" in WORKLOAD_KINDS:
        meta = read_meta(raw, source=source, kind=kind, namespaced=True)
        if not isinstance(raw.get("spec"), Mapping):
            raise InputError(source=source, kind=kind, name=meta.name, field="spec", problem="is missing")
        return Workload(meta=meta, api_version=api_version, kind=kind, raw=raw, source=source)
    meta_raw = raw.get("metadata")
    name = str(meta_raw.get("name", "")) if isinstance(meta_raw, Mapping) else ""
    return SkippedObject(source=source, api_version=api_version, kind=kind, name=name)
