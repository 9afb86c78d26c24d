"""The one place that lists every emulated controller, keyed by `group/Kind`.

Keys use the API group without version (`apps/Deployment`, `ray.io/RayCluster`); the core
group is spelled `core`. A controller accepts every version of its kind it knows (MPIJob
dispatches between kubeflow.org/v1 and v2beta1 itself). The store asks `controller_for` for
each object it holds and reconciles the ones that have a controller.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kai.sim.controllers import apps, batch, jobset, kubeflow, lws, model, mpi, objects, ray, ray_jobs

CONTROLLERS: Mapping[str, model.Controller] = MappingProxyType(
    {
        "apps/Deployment": apps.DeploymentController(),
        "apps/ReplicaSet": apps.ReplicaSetController(),
        "apps/StatefulSet": apps.StatefulSetController(),
        "batch/Job": batch.JobController(),
        "batch/CronJob": batch.CronJobController(),
        "ray.io/RayCluster": ray.RayClusterController(),
        "ray.io/RayJob": ray_jobs.RayJobController(),
        "ray.io/RayService": ray_jobs.RayServiceController(),
        "kubeflow.org/PyTorchJob": kubeflow.TrainingJobController(kubeflow.PYTORCH),
        "kubeflow.org/TFJob": kubeflow.TrainingJobController(kubeflow.TENSORFLOW),
        "kubeflow.org/XGBoostJob": kubeflow.TrainingJobController(kubeflow.XGBOOST),
        "kubeflow.org/JAXJob": kubeflow.TrainingJobController(kubeflow.JAX),
        "kubeflow.org/MPIJob": mpi.MPIJobController(),
        "kubeflow.org/Notebook": kubeflow.NotebookController(),
        "jobset.x-k8s.io/JobSet": jobset.JobSetController(),
        "leaderworkerset.x-k8s.io/LeaderWorkerSet": lws.LeaderWorkerSetController(),
    }
)

# Kinds whose controller replaces a pod it directly owns after that pod is evicted and gone.
_RESTARTING_POD_OWNERS = frozenset(
    {
        "apps/ReplicaSet",
        "apps/StatefulSet",
        "batch/Job",
        "ray.io/RayCluster",
        "kubeflow.org/PyTorchJob",
        "kubeflow.org/TFJob",
        "kubeflow.org/XGBoostJob",
        "kubeflow.org/JAXJob",
        "kubeflow.org/MPIJob",
    }
)


def registry_key(*, api_version: str, kind: str) -> str:
    """`group/Kind` for an apiVersion and kind (`v1` Pod gives `core/Pod`)."""
    group = api_version.split("/", 1)[0] if "/" in api_version else "core"
    return f"{group}/{kind}"


def controller_for(obj: model.Obj) -> model.Controller | None:
    """The emulated controller of `obj`'s kind, or None when nothing controls that kind."""
    key = registry_key(api_version=objects.api_version_of(obj), kind=objects.kind_of(obj))
    return CONTROLLERS.get(key)


def is_restarting_owner(*, api_version: str, kind: str) -> bool:
    """True when a pod directly owned by this kind is recreated by its controller once lost.

    Job-like owners stop replacing pods once finished (a Job past its backoffLimit, a training
    job that succeeded); this answers for the running case.
    """
    return registry_key(api_version=api_version, kind=kind) in _RESTARTING_POD_OWNERS
