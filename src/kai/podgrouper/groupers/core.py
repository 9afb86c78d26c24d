"""Groupers for built-in Kubernetes kinds: bare and Spark pods, Deployments, Jobs and CronJobs.

Each one restates a KAI plugin (``pkg/podgrouper/podgrouper/plugins/{podjob,spark,deployment,job,
cronjobs}``). StatefulSets and ReplicaSets use the default grouper unchanged: one PodGroup for the
whole set, minMember 1, so their pods are scheduled one by one. Pure, no side effects.
"""

from __future__ import annotations

from msgspec.structs import replace

from kai.podgrouper import base, model, objects
from kai.podgrouper import config as cfg

SPARK_APP_NAME_LABEL = "spark-app-name"
SPARK_APP_SELECTOR_LABEL = "spark-app-selector"


def group_default(ctx: base.GroupingContext) -> model.GroupingResult:
    """One PodGroup per top owner, minMember 1, priority ``train`` unless labelled otherwise."""
    return base.default_metadata(ctx)


def group_pod(ctx: base.GroupingContext) -> model.GroupingResult:
    """A pod whose top owner is a pod: its own PodGroup, or its Spark application's.

    Spark executors are owned by the driver pod; a pod labelled with both ``spark-app-name`` and
    ``spark-app-selector`` joins the PodGroup named by the ``spark-app-selector`` value, so a Spark
    application's driver and executors share one PodGroup.
    """
    result = base.default_metadata(ctx)
    pod_labels = objects.labels(ctx.pod)
    if isinstance(result, model.GroupingError):
        return result
    if SPARK_APP_NAME_LABEL in pod_labels and SPARK_APP_SELECTOR_LABEL in pod_labels:
        # A Spark application: group by the application selector.
        return replace(result, name=pod_labels[SPARK_APP_SELECTOR_LABEL])
    return result


def group_deployment(ctx: base.GroupingContext) -> model.GroupingResult:
    """A Deployment: one PodGroup per pod, owned by the pod, priority ``inference`` by default.

    Each replica is its own gang (``pg-<pod>-<podUID>``), so a scale-down deletes exactly the
    PodGroups of the removed pods.
    """
    result = base.default_metadata(ctx, kind_default_priority=cfg.INFERENCE)
    if isinstance(result, model.GroupingError):
        return result
    return replace(
        result,
        name=base.pod_group_name(obj=ctx.pod),
        owner=model.OwnerReference(
            api_version=objects.api_version(ctx.pod) or "v1",
            kind=objects.kind(ctx.pod) or "Pod",
            name=objects.name(ctx.pod),
            uid=objects.uid(ctx.pod),
        ),
    )


def group_job(ctx: base.GroupingContext) -> model.GroupingResult:
    """A batch Job: one PodGroup per pod (``pg-<podName>-<jobUID>``), minMember 1, owned by the Job.

    KAI's snapshot names the PodGroup after each pod, so the pods of a parallel Job are scheduled
    independently. (KAI's optional lookup of older, per-Job PodGroup names is not needed here.)
    """
    result = base.default_metadata(ctx)
    if isinstance(result, model.GroupingError):
        return result
    return replace(result, name=base.pod_group_name(obj=ctx.pod, uid_of=ctx.chain.top_owner))


def group_cronjob(ctx: base.GroupingContext) -> model.GroupingResult:
    """A CronJob's pod: the default grouper applied to the pod's Job (``pg-<job>-<jobUID>``).

    As in KAI, the Job, not the CronJob, is the PodGroup's base: its labels set the queue and its
    name and owner reference identify the PodGroup, so each scheduled run gets its own PodGroup.
    """
    job = next((owner for owner in ctx.chain.owners if objects.kind(owner) == "Job"), None)
    if job is None:
        return base.workload_error(
            ctx.pod,
            f"its top owner {objects.describe(ctx.chain.top_owner)} is a CronJob but no Job owns the pod",
            "let the CronJob controller create the Job that runs this pod",
        )
    return base.default_metadata(ctx, base=job)
