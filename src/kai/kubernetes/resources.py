"""Which REST paths a kind of object lives under: group, version, plural, scope.

An `ApiResource` is all the informer and the writer need to address any kind, built-in or custom.
Built-in kinds take their facts from lightkube's generated resource classes (`ApiResource.of`);
custom resources are spelled out. The catalogue below holds the kinds `kai run` reads and writes
(the run contract's "What it reads" and "What it writes").
"""

from __future__ import annotations

from urllib.parse import quote

import msgspec
from lightkube.core import resource as lk_resource
from lightkube.resources import apiextensions_v1, apps_v1, batch_v1, coordination_v1, core_v1, events_v1
from lightkube.resources import scheduling_v1 as k8s_scheduling_v1


class ApiResource(msgspec.Struct, frozen=True, kw_only=True):
    """One kind of API object as the REST API addresses it (group "" is the core group)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @classmethod
    def of(cls, res: type[lk_resource.Resource]) -> ApiResource:
        """The addressing facts of a lightkube resource class (e.g. `lightkube.resources.core_v1.Pod`)."""
        info = lk_resource.api_info(res)
        namespaced = issubclass(res, lk_resource.NamespacedResource)
        return cls(
            group=info.resource.group,
            version=info.resource.version,
            plural=info.plural,
            kind=info.resource.kind,
            namespaced=namespaced,
        )

    @property
    def api_version(self) -> str:
        """`apiVersion` as objects of this kind carry it (`v1`, `scheduling.run.ai/v2`)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def label(self) -> str:
        """A short unique name for logs and metric labels (`pods`, `queues.scheduling.run.ai`)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, *, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of the collection, or of one object (`name`) and its `subresource`.

        `namespace` is required for one object of a namespaced kind; without it a namespaced
        collection is the list across all namespaces. It is an error for cluster-scoped kinds.
        """
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.kind} is cluster-scoped; no namespace applies (got {namespace!r})")
            base += f"/namespaces/{quote(namespace, safe='')}"
        elif name is not None and self.namespaced:
            raise ValueError(f"{self.kind} {name!r} is namespaced; a namespace is required")
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource is not None:
                base += f"/{subresource}"
        elif subresource is not None:
            raise ValueError("a subresource needs an object name")
        return base


PODS = ApiResource.of(core_v1.Pod)
NODES = ApiResource.of(core_v1.Node)
NAMESPACES = ApiResource.of(core_v1.Namespace)
CONFIG_MAPS = ApiResource.of(core_v1.ConfigMap)
PRIORITY_CLASSES = ApiResource.of(k8s_scheduling_v1.PriorityClass)
LEASES = ApiResource.of(coordination_v1.Lease)
EVENTS = ApiResource.of(events_v1.Event)
JOBS = ApiResource.of(batch_v1.Job)
CRON_JOBS = ApiResource.of(batch_v1.CronJob)
DEPLOYMENTS = ApiResource.of(apps_v1.Deployment)
REPLICA_SETS = ApiResource.of(apps_v1.ReplicaSet)
STATEFUL_SETS = ApiResource.of(apps_v1.StatefulSet)
CUSTOM_RESOURCE_DEFINITIONS = ApiResource.of(apiextensions_v1.CustomResourceDefinition)

QUEUES = ApiResource(group="scheduling.run.ai", version="v2", plural="queues", kind="Queue", namespaced=False)
PODGROUPS = ApiResource(
    group="scheduling.run.ai", version="v2alpha2", plural="podgroups", kind="PodGroup", namespaced=True
)


def _workload(group: str, version: str, plural: str, kind: str) -> ApiResource:
    return ApiResource(group=group, version=version, plural=plural, kind=kind, namespaced=True)


WORKLOAD_RESOURCES: tuple[ApiResource, ...] = (
    _workload("ray.io", "v1", "rayclusters", "RayCluster"),
    _workload("ray.io", "v1", "rayjobs", "RayJob"),
    _workload("ray.io", "v1", "rayservices", "RayService"),
    _workload("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    _workload("kubeflow.org", "v1", "tfjobs", "TFJob"),
    _workload("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob"),
    _workload("kubeflow.org", "v1", "jaxjobs", "JAXJob"),
    _workload("kubeflow.org", "v2beta1", "mpijobs", "MPIJob"),
    _workload("kubeflow.org", "v1", "notebooks", "Notebook"),
    _workload("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    _workload("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"),
)
"""The workload operators' kinds the pod grouper reads as top owners (optional: a kind whose CRD is
not installed is never met)."""


# What `kai run`'s cycle reads; a kind whose CRD is not installed is simply never met (optional).
REQUIRED_RESOURCES: tuple[ApiResource, ...] = (NODES, PODS, PRIORITY_CLASSES, QUEUES, PODGROUPS)
OWNER_RESOURCES: tuple[ApiResource, ...] = (
    DEPLOYMENTS,
    REPLICA_SETS,
    STATEFUL_SETS,
    JOBS,
    CRON_JOBS,
    *WORKLOAD_RESOURCES,
)
"""The kinds the pod grouper reads as owners (optional)."""
