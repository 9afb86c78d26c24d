"""Groupers for Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, JAXJob, MPIJob) and Notebooks.

Gang size, as in KAI's ``plugins/kubeflow``:
  * ``spec.runPolicy.schedulingPolicy.minAvailable`` when set;
  * PyTorchJob only: else ``spec.elasticPolicy.minReplicas`` (an elastic job starts at its minimum
    and the scheduler grows it pod by pod);
  * else the sum of ``replicas`` over all replica specs; a spec without replicas, or with 0, is an
    error, as is a missing mandatory spec (XGBoost: Master and Worker; JAX: Worker; MPI: Launcher
    and Worker).
PyTorchJobs get subgroups ``master`` (its replicas) and ``worker`` (the rest of the gang), and
optionally ``worker-<i>`` segments of ``kai.scheduler/segment-size`` workers each. An MPIJob with
``launcherCreationPolicy: WaitForWorkersReady`` leaves the launcher out of the gang until the
launcher pod exists. Notebooks use the default grouper with priority ``build``. Pure, no side effects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from msgspec.structs import replace

from kai.podgrouper import base, model, objects
from kai.podgrouper import config as cfg

REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
MAX_SEGMENTS = 10_000
_PT_SPECS = "spec.pytorchReplicaSpecs"
_PT_WORKER = "spec.pytorchReplicaSpecs.Worker"


def _distributed(ctx: base.GroupingContext, *, specs_field: str, mandatory: Sequence[str] = ()) -> model.GroupingResult:
    """The shared Kubeflow rule: minAvailable, else the sum of replicas over all replica specs."""
    job = ctx.chain.top_owner
    result = base.default_metadata(ctx)
    if isinstance(result, model.GroupingError):
        return result
    min_available = objects.get_int(job, "spec", "runPolicy", "schedulingPolicy", "minAvailable", owner=job)
    if min_available is not None:
        # The user set the gang size explicitly.
        return replace(result, min_member=min_available)
    specs = objects.get_map(job, "spec", specs_field, owner=job)
    if specs is None:
        return base.workload_error(job, f"spec.{specs_field} is missing", f"add spec.{specs_field}")
    for required in mandatory:
        if required not in specs:
            return base.workload_error(
                job,
                f"spec.{specs_field} has no {required} replica spec, which is required",
                f"add {required}",
            )
    total = 0
    for spec_name in sorted(specs):
        replicas = objects.get_int(specs, spec_name, "replicas", owner=job, at=f"spec.{specs_field}")
        if not replicas:
            return base.workload_error(
                job,
                f"spec.{specs_field}.{spec_name} has {replicas or 0} replicas; 0 {spec_name} pods are not allowed",
                f"set spec.{specs_field}.{spec_name}.replicas to at least 1",
            )
        total += replicas
    if total <= 0:
        return base.workload_error(job, f"the job has {total} pods in total", "give every replica spec replicas > 0")
    return replace(result, min_member=total)


def _segment_size(pod: objects.RawObject, worker: Mapping[str, Any] | None, job: objects.RawObject) -> int | None:
    """``kai.scheduler/segment-size`` from the pod, else the Worker template; None when unset."""
    candidates = (
        (objects.annotations(pod).get(cfg.SEGMENT_SIZE_ANNOTATION, ""), f"pod {objects.name(pod)}"),
        (
            objects.get_str(
                worker or {},
                "template",
                "metadata",
                "annotations",
                cfg.SEGMENT_SIZE_ANNOTATION,
                owner=job,
                at=_PT_WORKER,
            )
            or "",
            "the Worker pod template",
        ),
    )
    for text, where in candidates:
        if not text:
            continue
        size = objects.parse_int_text(text)
        if size is None or size <= 0:
            raise objects.InvalidObjectError(
                f"{objects.describe(job)}: {cfg.SEGMENT_SIZE_ANNOTATION}={text!r} on {where} must be a positive integer"
            )
        return size
    return None


def _worker_annotation(pod: objects.RawObject, worker: Mapping[str, Any], key: str) -> str:
    return objects.annotations(pod).get(key) or (
        objects.get_str(worker, "template", "metadata", "annotations", key, at=_PT_WORKER) or ""
    )


def _segment_topology(
    pod: objects.RawObject, worker: Mapping[str, Any], job: objects.RawObject
) -> model.TopologyConstraint | None:
    topology = _worker_annotation(pod, worker, cfg.TOPOLOGY_ANNOTATION) or objects.annotations(job).get(
        cfg.TOPOLOGY_ANNOTATION, ""
    )
    required = _worker_annotation(pod, worker, cfg.SEGMENT_TOPOLOGY_REQUIRED_ANNOTATION)
    preferred = _worker_annotation(pod, worker, cfg.SEGMENT_TOPOLOGY_PREFERRED_ANNOTATION)
    if not topology or not (required or preferred):
        return None
    return model.TopologyConstraint(topology=topology, required_level=required, preferred_level=preferred)


def group_pytorch(ctx: base.GroupingContext) -> model.GroupingResult:
    """PyTorchJob: gang = minAvailable, else elasticPolicy.minReplicas, else all replicas; with subgroups."""
    job = ctx.chain.top_owner
    pod = ctx.pod
    min_available = objects.get_int(job, "spec", "runPolicy", "schedulingPolicy", "minAvailable", owner=job)
    min_replicas = objects.get_int(job, "spec", "elasticPolicy", "minReplicas", owner=job)
    result = _distributed(ctx, specs_field="pytorchReplicaSpecs")
    if isinstance(result, model.GroupingError):
        return result
    gang = (
        min_available if min_available is not None else min_replicas if min_replicas is not None else result.min_member
    )
    specs = objects.get_map(job, "spec", "pytorchReplicaSpecs", owner=job) or {}
    replica_type = objects.labels(pod).get(REPLICA_TYPE_LABEL, "")

    sub_groups: list[model.SubGroup] = []
    pod_sub_group: str | None = None
    master_replicas = objects.get_int(specs, "Master", "replicas", owner=job, at=_PT_SPECS) or 0
    if "Master" in specs and master_replicas > 0:
        # The master replicas must all start: their own subgroup.
        sub_groups.append(model.SubGroup(name="master", min_member=master_replicas))
        if replica_type == "master":
            pod_sub_group = "master"
    worker = objects.get_map(specs, "Worker", owner=job, at=_PT_SPECS)
    if "Worker" in specs:
        worker_min = max(0, gang - master_replicas)
        sub_groups.append(model.SubGroup(name="worker", min_member=worker_min))
        segment_size = _segment_size(pod, worker, job)
        if segment_size is None:
            # Workers form one subgroup holding the rest of the gang.
            if replica_type == "worker":
                pod_sub_group = "worker"
        else:
            # Workers are split into segments of segment_size pods (the last may be smaller).
            workers = objects.get_int(specs, "Worker", "replicas", owner=job, at=_PT_SPECS)
            workers = 1 if workers is None else workers
            segments = -(-workers // segment_size)
            if segments > MAX_SEGMENTS:
                return base.workload_error(
                    job,
                    f"{cfg.SEGMENT_SIZE_ANNOTATION}={segment_size} splits {workers} workers into {segments} "
                    f"segments, more than the {MAX_SEGMENTS} allowed",
                    "use a larger segment size",
                )
            topology = _segment_topology(pod, worker or {}, job)
            for index in range(segments):
                size = min(segment_size, workers - index * segment_size)
                sub_groups.append(
                    model.SubGroup(name=f"worker-{index}", min_member=size, parent="worker", topology=topology)
                )
            if replica_type == "worker":
                index_text = objects.labels(pod).get(REPLICA_INDEX_LABEL)
                replica_index = objects.parse_int_text(index_text) if index_text is not None else None
                if replica_index is None or replica_index < 0:
                    problem = (
                        f"worker pod lacks the {REPLICA_INDEX_LABEL} label"
                        if index_text is None
                        else f"worker pod label {REPLICA_INDEX_LABEL}={index_text} is not an index >= 0"
                    )
                    return base.workload_error(
                        pod,
                        f"{problem}; worker segments need it",
                        f"let the training operator set the {REPLICA_INDEX_LABEL} label",
                    )
                pod_sub_group = f"worker-{replica_index // segment_size}"
    return replace(result, min_member=gang, sub_groups=tuple(sub_groups), pod_sub_group=pod_sub_group)


def group_tensorflow(ctx: base.GroupingContext) -> model.GroupingResult:
    return _distributed(ctx, specs_field="tfReplicaSpecs")


def group_xgboost(ctx: base.GroupingContext) -> model.GroupingResult:
    return _distributed(ctx, specs_field="xgbReplicaSpecs", mandatory=("Master", "Worker"))


def group_jax(ctx: base.GroupingContext) -> model.GroupingResult:
    return _distributed(ctx, specs_field="jaxReplicaSpecs", mandatory=("Worker",))


def _launcher_exists(ctx: base.GroupingContext) -> bool:
    job = ctx.chain.top_owner
    selector = {JOB_NAME_LABEL: objects.name(job), JOB_ROLE_LABEL: "launcher"}
    candidates = (ctx.pod, *ctx.view.list_pods(objects.namespace(job), selector))
    return any(
        all(objects.labels(pod).get(k) == v for k, v in selector.items())
        and objects.metadata(pod).get("deletionTimestamp") is None
        for pod in candidates
    )


def group_mpi(ctx: base.GroupingContext) -> model.GroupingResult:
    """MPIJob (v1, v2beta1): the Kubeflow rule; a delayed launcher stays out of the gang until it exists."""
    job = ctx.chain.top_owner
    result = _distributed(ctx, specs_field="mpiReplicaSpecs", mandatory=("Launcher", "Worker"))
    if isinstance(result, model.GroupingError):
        return result
    policy = objects.get_str(job, "spec", "launcherCreationPolicy", owner=job)
    if policy != "WaitForWorkersReady" or _launcher_exists(ctx):
        return result
    # The operator creates the launcher only once the workers run: gang the workers alone for now.
    launchers = objects.get_int(job, "spec", "mpiReplicaSpecs", "Launcher", "replicas", owner=job)
    if not launchers:
        return base.workload_error(
            job,
            "spec.mpiReplicaSpecs.Launcher has no replicas",
            "set spec.mpiReplicaSpecs.Launcher.replicas to 1",
        )
    return replace(result, min_member=result.min_member - launchers)


def group_notebook(ctx: base.GroupingContext) -> model.GroupingResult:
    """Kubeflow Notebook: the default grouper with priority ``build`` (interactive, non-preemptible)."""
    return base.default_metadata(ctx, kind_default_priority=cfg.BUILD)
