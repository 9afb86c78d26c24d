"""Emulation of the Kubeflow operators: training-operator v1 jobs (PyTorchJob, TFJob, XGBoostJob,
JAXJob, MPIJob kubeflow.org/v1) and the notebook controller (Notebook kubeflow.org/v1beta1).
Facts from kubeflow/training-operator pkg/controller.v1 and kubeflow/kubeflow
components/notebook-controller.

training-operator v1 (all but MPIJob v2beta1):
* One pod per replica type and index, named `<job>-<type>-<index>` (type lower-cased), with
  the labels `training.kubeflow.org/operator-name` (`pytorchjob-controller`, ...),
  `training.kubeflow.org/job-name`, `training.kubeflow.org/replica-type` (lower case),
  `training.kubeflow.org/replica-index`, and `training.kubeflow.org/job-role: master` on the
  master role (PyTorch/XGBoost Master; TF Chief or Master, else worker 0; JAX index 0; MPI
  launcher). Replica type keys are case-insensitive; replicas default to 1 (MPI workers 0).
  The pod's restartPolicy is the replica's (`ExitCode` becomes `Never`); defaults: PyTorchJob
  OnFailure, the others Never. The webhook's check that a container named `pytorch`,
  `tensorflow`, `xgboost` or `jax` exists is applied. MPIJob v1: launcher `<job>-launcher`.
* A missing pod is recreated under the same name once the old one is gone (eviction);
  a Failed pod is deleted and recreated when its replica restartPolicy is OnFailure, Always or
  ExitCode, counting one restart against `runPolicy.backoffLimit`; with Never the job fails.
* Elastic PyTorchJobs start with `replicas` workers (scaling by HPA is not emulated).
* The job succeeds when all its master-role pods (or, without one, all workers; TF without
  chief: worker 0; elastic PyTorch: any worker) succeeded. Once finished no pod is created and
  `runPolicy.cleanPodPolicy` (default None) decides which pods are deleted.
* `runPolicy.suspend: true` deletes the pods. Services and PodGroups are not created.

MPIJob kubeflow.org/v2beta1 follows mpi-operator v2 instead: see `mpi`.

Notebook: a StatefulSet `<notebook>` with one replica (none with the `kubeflow-resource-stopped`
annotation) whose pod `<notebook>-0` carries `statefulset` and `notebook-name` labels plus the
Notebook's labels and annotations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from kai.sim.controllers import model, objects

GROUP = "kubeflow.org"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
NOTEBOOK_STOP_ANNOTATION = "kubeflow-resource-stopped"

RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POLICIES = ("None", "Running", "All")


class _Kind(msgspec.Struct, frozen=True, kw_only=True):
    """How one training-operator job kind differs from the others."""

    kind: str
    specs_field: str
    replica_types: tuple[str, ...]  # canonical spellings, in reconcile order
    operator: str
    default_restart: str
    container: str | None  # the container the webhook requires, if any
    masters: tuple[str, ...]  # replica types that hold the master role
    worker_zero_is_master: bool  # without a master type, worker 0 holds the role
    required: tuple[str, ...] = ()
    default_replicas: Mapping[str, int] | None = None


PYTORCH = _Kind(
    kind="PyTorchJob",
    specs_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    operator="pytorchjob-controller",
    default_restart="OnFailure",
    container="pytorch",
    masters=("Master",),
    worker_zero_is_master=False,
)
TENSORFLOW = _Kind(
    kind="TFJob",
    specs_field="tfReplicaSpecs",
    replica_types=("PS", "Master", "Chief", "Worker", "Evaluator"),
    operator="tfjob-controller",
    default_restart="Never",
    container="tensorflow",
    masters=("Chief", "Master"),
    worker_zero_is_master=True,
)
XGBOOST = _Kind(
    kind="XGBoostJob",
    specs_field="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    operator="xgboostjob-controller",
    default_restart="Never",
    container="xgboost",
    masters=("Master",),
    worker_zero_is_master=False,
    required=("Master",),
)
JAX = _Kind(
    kind="JAXJob",
    specs_field="jaxReplicaSpecs",
    replica_types=("Worker",),
    operator="jaxjob-controller",
    default_restart="Never",
    container="jax",
    masters=(),
    worker_zero_is_master=True,
    required=("Worker",),
)
MPI_V1 = _Kind(
    kind="MPIJob",
    specs_field="mpiReplicaSpecs",
    replica_types=("Launcher", "Worker"),
    operator="mpijob-controller",
    default_restart="Never",
    container=None,
    masters=("Launcher",),
    worker_zero_is_master=False,
    required=("Launcher",),
    default_replicas={"Worker": 0},
)


class _Replica(msgspec.Struct, frozen=True, kw_only=True):
    """One validated replica spec."""

    type: str
    replicas: int
    restart: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]


def _parse_replicas(spec: Mapping[str, Any], kind: _Kind) -> list[_Replica]:
    path = f"spec.{kind.specs_field}"
    raw_specs = objects.req_map(
        spec, kind.specs_field, path="spec", hint=f"list the replica types under {kind.specs_field}"
    )
    canonical = {name.lower(): name for name in kind.replica_types}
    found: dict[str, _Replica] = {}
    for key, raw in raw_specs.items():
        type_name = canonical.get(str(key).lower())
        field = f"{path}.{key}"
        if type_name is None:
            raise objects.InvalidSpec(
                field, f"is not a {kind.kind} replica type", f"use one of {', '.join(kind.replica_types)}"
            )
        if type_name in found:
            raise objects.InvalidSpec(field, f"repeats replica type {type_name}", "keep one entry per type")
        if not isinstance(raw, Mapping):
            raise objects.InvalidSpec(field, "must be a mapping", "describe the replicas and their template")
        default = (kind.default_replicas or {}).get(type_name, 1)
        replicas = objects.opt_int(raw, "replicas", path=field, default=default)
        restart = objects.one_of(
            objects.opt_str(raw, "restartPolicy", path=field, default=kind.default_restart),
            RESTART_POLICIES,
            field=f"{field}.restartPolicy",
        )
        template = objects.required_template(raw, "template", path=field)
        labels, annotations, pod_spec = objects.template_parts(template, path=f"{field}.template")
        if kind.container is not None and kind.container not in objects.container_names(pod_spec):
            raise objects.InvalidSpec(
                f"{field}.template.spec.containers",
                f"has no container named {kind.container!r}",
                f"name the main container {kind.container!r}, as the {kind.kind} webhook requires",
            )
        found[type_name] = _Replica(
            type=type_name,
            replicas=replicas,
            restart=restart,
            labels=labels,
            annotations=annotations,
            spec=pod_spec,
        )
    for type_name in kind.required:
        if type_name not in found:
            raise objects.InvalidSpec(
                f"{path}.{type_name}", "is required but missing", f"add a {type_name} replica spec"
            )
    return [found[t] for t in kind.replica_types if t in found]


def _master_role(kind: _Kind, replicas: Sequence[_Replica], type_name: str, index: int) -> bool:
    types = {replica.type for replica in replicas}
    if any(master in types for master in kind.masters):
        return type_name in kind.masters
    return kind.worker_zero_is_master and type_name == "Worker" and index == 0


class TrainingJobController(objects.GuardedController):
    """A kubeflow.org/v1 training job (PyTorchJob, TFJob, XGBoostJob, JAXJob, MPIJob v1)."""

    def __init__(self, job_kind: _Kind) -> None:
        self._job = job_kind
        self.kind = job_kind.kind

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        job = self._job
        spec = objects.spec_of(owner)
        replicas = _parse_replicas(spec, job)
        run_policy = objects.opt_map(spec, "runPolicy", path="spec")
        clean = objects.one_of(
            objects.opt_str(
                run_policy,
                "cleanPodPolicy",
                path="spec.runPolicy",
                default=objects.opt_str(spec, "cleanPodPolicy", path="spec", default="None"),
            ),
            CLEAN_POLICIES,
            field="spec.runPolicy.cleanPodPolicy",
        )
        backoff = objects.opt_int_or_none(run_policy, "backoffLimit", path="spec.runPolicy")
        suspend = objects.opt_bool(run_policy, "suspend", path="spec.runPolicy")
        elastic = spec.get("elasticPolicy") is not None

        name = objects.name_of(owner)
        status = objects.status_of(owner)
        tracking = objects.tracking_of(owner)
        restarts = int(tracking.get("restarts") or 0)
        pods = objects.children_of_kind(children, "Pod")
        by_slot: dict[tuple[str, int], model.Obj] = {}
        strays: list[model.Obj] = []
        lower = {replica.type.lower(): replica for replica in replicas}
        for pod in pods:
            labels = objects.labels_of(pod)
            replica = lower.get(labels.get(REPLICA_TYPE_LABEL, ""))
            index_text = labels.get(REPLICA_INDEX_LABEL, "")
            if replica is None or not index_text.isdigit() or int(index_text) >= replica.replicas:
                strays.append(pod)
                continue
            by_slot[(replica.type, int(index_text))] = pod

        conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
        finished = objects.condition_true(owner, "Succeeded") or objects.condition_true(owner, "Failed")
        creates: list[dict[str, Any]] = []
        deletes: list[model.ObjectRef] = [
            objects.ref_to(p) for p in strays if objects.pod_state(p) is not objects.PodState.TERMINATING
        ]
        events: list[model.Event] = []

        # 1. Outcome of the pods: failures to restart or to fail the job, success.
        outcome = "" if finished else self._outcome(replicas, by_slot, elastic)
        restart_now = [] if finished or outcome else self._restartable_failures(replicas, by_slot)
        counted = {str(uid) for uid in tracking.get("restarted", ())}
        fresh = [pod for pod in restart_now if objects.uid_of(pod) not in counted]
        restarts += len(fresh)
        counted = (counted | {objects.uid_of(pod) for pod in fresh}) & {objects.uid_of(pod) for pod in pods}
        past_backoff = bool(fresh) and backoff is not None and restarts > backoff
        if past_backoff:
            outcome = "Failed"
        if outcome == "Failed":
            message = f"{job.kind} {name} has failed"
            conditions.append(objects.condition("Failed", reason=f"{job.kind}Failed", message=message))
            events.append(objects.owner_event(owner, "Warning", f"{job.kind}Failed", message))
        elif outcome == "Succeeded":
            message = f"{job.kind} {name} is successfully completed."
            conditions.append(objects.condition("Succeeded", reason=f"{job.kind}Succeeded", message=message))
            events.append(objects.owner_event(owner, "Normal", f"{job.kind}Succeeded", message))

        # 2. Act: clean up a finished or suspended job, or restart and create pods.
        if finished or outcome:
            # Past the backoff limit the operator deletes every pod before the job counts as finished.
            deletes.extend(cleanup_pods(by_slot.values(), "All" if past_backoff else clean))
        elif suspend:
            deletes.extend(
                objects.ref_to(p) for p in by_slot.values() if objects.pod_state(p) is not objects.PodState.TERMINATING
            )
        else:
            deletes.extend(objects.ref_to(pod) for pod in restart_now)
            for replica in replicas:
                for index in range(replica.replicas):
                    if (replica.type, index) not in by_slot:
                        creates.append(self._pod(owner, replicas, replica, index, names_))

        # 3. Status: per replica type counts, conditions, restart bookkeeping.
        replica_statuses: dict[str, dict[str, int]] = {}
        for replica in replicas:
            counts = {"active": 0, "succeeded": 0, "failed": 0}
            for (type_name, _), pod in by_slot.items():
                if type_name == replica.type:
                    state = objects.pod_state(pod)
                    key = {"succeeded": "succeeded", "failed": "failed"}.get(str(state), "active")
                    counts[key] += 1
            replica_statuses[replica.type] = counts
        if not conditions:
            conditions.append(
                objects.condition("Created", reason=f"{job.kind}Created", message=f"{job.kind} {name} is created.")
            )
        new_status: dict[str, Any] = {"conditions": conditions, "replicaStatuses": replica_statuses}
        new_status[objects.TRACKING_KEY] = {"restarts": restarts, "restarted": sorted(counted)}
        return model.Reconciliation(
            create=tuple(creates),
            delete=tuple(deletes),
            status=objects.status_change(owner, new_status),
            events=tuple(events),
        )

    def _outcome(
        self, replicas: Sequence[_Replica], by_slot: Mapping[tuple[str, int], model.Obj], elastic: bool
    ) -> str:
        """ "Failed" (a failed pod that may not restart), "Succeeded", or "" (still running)."""
        for (type_name, _), pod in sorted(by_slot.items()):
            replica = next(r for r in replicas if r.type == type_name)
            if objects.pod_state(pod) is objects.PodState.FAILED and replica.restart == "Never":
                return "Failed"

        def succeeded(type_name: str, index: int) -> bool:
            pod = by_slot.get((type_name, index))
            return pod is not None and objects.pod_state(pod) is objects.PodState.SUCCEEDED

        types = {replica.type: replica for replica in replicas}
        masters = [types[t] for t in self._job.masters if t in types]
        if masters:
            done = all(succeeded(r.type, i) for r in masters for i in range(r.replicas))
            return "Succeeded" if done and any(r.replicas for r in masters) else ""
        workers = types.get("Worker")
        if workers is None or workers.replicas == 0:
            return ""
        if self._job is TENSORFLOW:
            return "Succeeded" if succeeded("Worker", 0) else ""
        if elastic:
            return "Succeeded" if any(succeeded("Worker", i) for i in range(workers.replicas)) else ""
        return "Succeeded" if all(succeeded("Worker", i) for i in range(workers.replicas)) else ""

    @staticmethod
    def _restartable_failures(
        replicas: Sequence[_Replica], by_slot: Mapping[tuple[str, int], model.Obj]
    ) -> list[model.Obj]:
        restart_types = {r.type for r in replicas if r.restart in ("OnFailure", "Always", "ExitCode")}
        return [
            pod
            for (type_name, _), pod in sorted(by_slot.items())
            if type_name in restart_types and objects.pod_state(pod) is objects.PodState.FAILED
        ]

    def _pod(
        self,
        owner: model.Obj,
        replicas: Sequence[_Replica],
        replica: _Replica,
        index: int,
        names_: model.NameSource,
    ) -> dict[str, Any]:
        job = self._job
        name = objects.name_of(owner)
        type_lower = replica.type.lower()
        labels = {
            **replica.labels,
            OPERATOR_NAME_LABEL: job.operator,
            JOB_NAME_LABEL: name.replace("/", "-"),
            REPLICA_TYPE_LABEL: type_lower,
            REPLICA_INDEX_LABEL: str(index),
        }
        if _master_role(job, replicas, replica.type, index):
            labels[JOB_ROLE_LABEL] = "master"
        spec = dict(replica.spec)
        spec["restartPolicy"] = "Never" if replica.restart == "ExitCode" else replica.restart
        pod_name = (
            f"{name}-launcher" if job is MPI_V1 and replica.type == "Launcher" else f"{name}-{type_lower}-{index}"
        )
        return objects.build_pod(
            owner=owner,
            name=pod_name,
            generate_name=None,
            uid=names_.uid(scope=objects.uid_of(owner)),
            labels=labels,
            annotations=replica.annotations,
            spec=spec,
        )


def cleanup_pods(pods: Iterable[model.Obj], policy: str) -> list[model.ObjectRef]:
    """Pods a finished job deletes under `cleanPodPolicy` (Running also covers Pending pods)."""
    result: list[model.ObjectRef] = []
    for pod in pods:
        state = objects.pod_state(pod)
        if policy == "All" and state is not objects.PodState.TERMINATING:
            result.append(objects.ref_to(pod))
        elif policy == "Running" and state is objects.PodState.ACTIVE:
            result.append(objects.ref_to(pod))
    return result


class NotebookController(objects.GuardedController):
    """kubeflow.org/v1beta1 Notebook: one StatefulSet of one pod."""

    kind = "Notebook"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        template = objects.required_template(spec, "template", path="spec")
        _, _, pod_spec = objects.template_parts(template, path="spec.template")
        name = objects.name_of(owner)
        if any(objects.name_of(sts) == name for sts in objects.children_of_kind(children, "StatefulSet")):
            return model.Reconciliation()
        annotations = objects.annotations_of(owner)
        replicas = 0 if NOTEBOOK_STOP_ANNOTATION in annotations else 1
        first = pod_spec["containers"][0]
        first.setdefault("workingDir", "/home/jovyan")
        if not first.get("ports"):
            first["ports"] = [{"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"}]
        labels = {"statefulset": name, "notebook-name": name, **objects.labels_of(owner)}
        sts = objects.new_object(
            api_version="apps/v1",
            kind="StatefulSet",
            name=name,
            namespace=objects.namespace_of(owner),
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels={},
            annotations=annotations,
            spec={
                "replicas": replicas,
                "selector": {"matchLabels": {"statefulset": name}},
                "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
            },
        )
        return model.Reconciliation(create=(sts,))
