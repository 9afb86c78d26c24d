"""Every pod grouper, registered in one place and keyed by the top owner's type.

Key convention: ``"<API group>/<Kind>"``, the top owner's apiVersion without its version, then the
kind: ``"batch/Job"``, ``"ray.io/RayCluster"``, and ``"/Pod"`` for the core group. Keys carry no
version, so a grouper serves every version of its kind (KAI keys by group, version and kind, with a
``*`` wildcard version; the kinds below cover the versions KAI registers). Any other kind falls
back to the default grouper, as in KAI: one PodGroup per top owner with minMember 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kai.podgrouper import base, objects
from kai.podgrouper.groupers import core, jobset, kubeflow, lws, ray

DEFAULT_GROUPER = base.FunctionGrouper(name="default", fn=core.group_default)

_GROUPERS: Mapping[str, base.Grouper] = MappingProxyType(
    {
        "/Pod": base.FunctionGrouper(name="pod", fn=core.group_pod),
        "apps/Deployment": base.FunctionGrouper(name="deployment", fn=core.group_deployment),
        "apps/StatefulSet": DEFAULT_GROUPER,
        "apps/ReplicaSet": DEFAULT_GROUPER,
        "batch/Job": base.FunctionGrouper(name="job", fn=core.group_job),
        "batch/CronJob": base.FunctionGrouper(name="cronjob", fn=core.group_cronjob),
        "kubeflow.org/PyTorchJob": base.FunctionGrouper(name="pytorchjob", fn=kubeflow.group_pytorch),
        "kubeflow.org/TFJob": base.FunctionGrouper(name="tfjob", fn=kubeflow.group_tensorflow),
        "kubeflow.org/XGBoostJob": base.FunctionGrouper(name="xgboostjob", fn=kubeflow.group_xgboost),
        "kubeflow.org/JAXJob": base.FunctionGrouper(name="jaxjob", fn=kubeflow.group_jax),
        "kubeflow.org/MPIJob": base.FunctionGrouper(name="mpijob", fn=kubeflow.group_mpi),
        "kubeflow.org/Notebook": base.FunctionGrouper(name="notebook", fn=kubeflow.group_notebook),
        "ray.io/RayCluster": base.FunctionGrouper(name="raycluster", fn=ray.group_ray_cluster),
        "ray.io/RayJob": base.FunctionGrouper(name="rayjob", fn=ray.group_ray_job),
        "ray.io/RayService": base.FunctionGrouper(name="rayservice", fn=ray.group_ray_service),
        "jobset.x-k8s.io/JobSet": base.FunctionGrouper(name="jobset", fn=jobset.group_jobset),
        "leaderworkerset.x-k8s.io/LeaderWorkerSet": base.FunctionGrouper(name="leaderworkerset", fn=lws.group_lws),
    }
)


def grouper_for(*, top_owner: objects.RawObject) -> base.Grouper:
    """The grouper for a top owner's type; the default grouper for types without their own."""
    return _GROUPERS.get(objects.group_kind_key(top_owner), DEFAULT_GROUPER)


def registered_kinds() -> tuple[str, ...]:
    """The registry keys, sorted: the kinds with their own grouping rules."""
    return tuple(sorted(_GROUPERS))
