"""Grouper for JobSet (``jobset.x-k8s.io``), as in KAI's JobSet plugin at the reference snapshot.

``spec.startupPolicy.startupPolicyOrder`` decides the shape:
  * ``InOrder`` (the default here): one PodGroup per replicatedJob, ``pg-<jobset>-<uid>-<rjob>``,
    because the JobSet controller starts the replicatedJobs one after another and a single gang
    over all of them would deadlock;
  * anything else (``AnyOrder``): one PodGroup for the JobSet, ``pg-<jobset>-<uid>``.
A replicatedJob needs ``replicas * min(parallelism, completions)`` pods at once (replicas and
parallelism default to 1, completions counts only when set and smaller); the AnyOrder gang is the
sum over all replicatedJobs. The pod's replicatedJob comes from its
``jobset.sigs.k8s.io/replicatedjob-name`` label. Pure, no side effects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace

from kai.podgrouper import base, model, objects

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


def _replicated_job_size(rjob: Mapping[str, Any], jobset: objects.RawObject) -> int:
    where = f"spec.replicatedJobs[{rjob.get('name')}]"
    replicas = objects.get_int(rjob, "replicas", owner=jobset, at=where)
    replicas = replicas if replicas is not None and replicas > 0 else 1
    parallelism = objects.get_int(rjob, "template", "spec", "parallelism", owner=jobset, at=where)
    parallelism = parallelism if parallelism is not None and parallelism > 0 else 1
    completions = objects.get_int(rjob, "template", "spec", "completions", owner=jobset, at=where)
    if completions is not None and 0 < completions < parallelism:
        parallelism = completions
    return max(1, replicas * parallelism)


def group_jobset(ctx: base.GroupingContext) -> model.GroupingResult:
    jobset = ctx.chain.top_owner
    rjob_name = objects.labels(ctx.pod).get(REPLICATED_JOB_LABEL, "")
    if not rjob_name:
        return base.workload_error(
            ctx.pod,
            f"the pod of {objects.describe(jobset)} lacks the {REPLICATED_JOB_LABEL} label",
            "let the JobSet controller create the pod",
        )
    result = base.default_metadata(ctx)
    if isinstance(result, model.GroupingError):
        return result
    order = objects.get_str(jobset, "spec", "startupPolicy", "startupPolicyOrder", owner=jobset) or "InOrder"
    rjobs = objects.get_list(jobset, "spec", "replicatedJobs", owner=jobset) or ()
    if order == "InOrder":
        # One gang per replicatedJob; the JobSet controller starts them in sequence.
        rjob = next((r for r in rjobs if r.get("name") == rjob_name), None)
        size = 1 if rjob is None else _replicated_job_size(rjob, jobset)
        return replace(result, name=f"{result.name}-{rjob_name}", min_member=size)
    # AnyOrder: every replicatedJob starts together, one gang for all of them.
    total = sum(_replicated_job_size(r, jobset) for r in rjobs if r.get("name"))
    return replace(result, min_member=max(1, total))
