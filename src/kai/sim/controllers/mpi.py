"""Emulation of MPIJob (kubeflow.org): v2beta1 follows mpi-operator v2 (kubeflow/mpi-operator),
kubeflow.org/v1 the training-operator (see `kubeflow`).

mpi-operator v2: worker pods `<job>-worker-<i>` with the labels
`training.kubeflow.org/operator-name: mpi-operator`, `training.kubeflow.org/job-name`,
`training.kubeflow.org/job-role: worker` and `training.kubeflow.org/replica-index`, hostname = pod
name and subdomain = job name; and a launcher batch Job `<job>-launcher` (label `app: <job>`)
whose pods `<job>-launcher-<5>` carry job-role `launcher`. The launcher Job is created at once,
or, with `launcherCreationPolicy: WaitForWorkersReady`, once every worker runs. A lost worker is
recreated under its name; a failed one is deleted and recreated unless its restartPolicy is
Never. The MPIJob succeeds or fails with the launcher Job; `runPolicy.cleanPodPolicy` (default
None) then decides which workers are deleted. `runPolicy.suspend` deletes workers and launcher.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai.sim.controllers import kubeflow, model, objects


class MPIJobController:
    """kubeflow.org MPIJob: v2beta1 follows mpi-operator v2, v1 the training-operator."""

    kind = "MPIJob"

    def __init__(self) -> None:
        self._v1 = kubeflow.TrainingJobController(kubeflow.MPI_V1)

    def reconcile(
        self, *, owner: model.Obj, children: Sequence[model.Obj], names: model.NameSource, now: float | None = None
    ) -> model.Reconciliation:
        if objects.api_version_of(owner).endswith("/v1"):
            return self._v1.reconcile(owner=owner, children=children, names=names)
        return objects.guarded(owner, lambda: self._reconcile_v2(owner, children, names))

    def _reconcile_v2(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        path = "spec.mpiReplicaSpecs"
        specs = objects.req_map(spec, "mpiReplicaSpecs", path="spec")
        launcher_raw = objects.req_map(specs, "Launcher", path=path)
        launcher_replicas = objects.opt_int(launcher_raw, "replicas", path=f"{path}.Launcher", default=1)
        if launcher_replicas != 1:
            raise objects.InvalidSpec(
                f"{path}.Launcher.replicas", f"must be 1, got {launcher_replicas}", "use one launcher"
            )
        launcher_template = objects.required_template(launcher_raw, "template", path=f"{path}.Launcher")
        l_labels, l_annotations, l_spec = objects.template_parts(launcher_template, path=f"{path}.Launcher.template")
        l_restart = objects.one_of(
            objects.opt_str(launcher_raw, "restartPolicy", path=f"{path}.Launcher", default="Never"),
            kubeflow.RESTART_POLICIES,
            field=f"{path}.Launcher.restartPolicy",
        )
        worker_raw = objects.opt_map(specs, "Worker", path=path)
        worker_replicas = objects.opt_int(worker_raw, "replicas", path=f"{path}.Worker", default=0)
        w_labels: dict[str, str] = {}
        w_annotations: dict[str, str] = {}
        w_spec: dict[str, Any] = {}
        w_restart = "Never"
        if worker_raw:
            worker_template = objects.required_template(worker_raw, "template", path=f"{path}.Worker")
            w_labels, w_annotations, w_spec = objects.template_parts(worker_template, path=f"{path}.Worker.template")
            w_restart = objects.one_of(
                objects.opt_str(worker_raw, "restartPolicy", path=f"{path}.Worker", default="Never"),
                kubeflow.RESTART_POLICIES,
                field=f"{path}.Worker.restartPolicy",
            )
        run_policy = objects.opt_map(spec, "runPolicy", path="spec")
        clean = objects.one_of(
            objects.opt_str(run_policy, "cleanPodPolicy", path="spec.runPolicy", default="None"),
            kubeflow.CLEAN_POLICIES,
            field="spec.runPolicy.cleanPodPolicy",
        )
        suspend = objects.opt_bool(run_policy, "suspend", path="spec.runPolicy")
        backoff = objects.opt_int_or_none(run_policy, "backoffLimit", path="spec.runPolicy")
        creation = objects.one_of(
            objects.opt_str(spec, "launcherCreationPolicy", path="spec", default="AtStartup"),
            ("AtStartup", "WaitForWorkersReady"),
            field="spec.launcherCreationPolicy",
        )

        name = objects.name_of(owner)
        launcher_name = f"{name}-launcher"
        pods = objects.children_of_kind(children, "Pod")
        jobs = {objects.name_of(j): j for j in objects.children_of_kind(children, "Job")}
        launcher = jobs.get(launcher_name)
        workers: dict[int, model.Obj] = {}
        deletes: list[model.ObjectRef] = []
        for pod in pods:
            index_text = objects.labels_of(pod).get(kubeflow.REPLICA_INDEX_LABEL, "")
            if index_text.isdigit() and int(index_text) < worker_replicas:
                workers[int(index_text)] = pod
            elif objects.pod_state(pod) is not objects.PodState.TERMINATING:
                deletes.append(objects.ref_to(pod))
        status = objects.status_of(owner)
        conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
        finished = objects.condition_true(owner, "Succeeded") or objects.condition_true(owner, "Failed")
        outcome = "" if finished or launcher is None else _launcher_outcome(launcher)
        creates: list[dict[str, Any]] = []
        events: list[model.Event] = []
        if outcome:
            verb = "successfully completed" if outcome == "Succeeded" else "has failed"
            message = f"MPIJob {objects.namespace_of(owner)}/{name} {verb}."
            conditions.append(objects.condition(outcome, reason=f"MPIJob{outcome}", message=message))
            events.append(
                objects.owner_event(
                    owner, "Normal" if outcome == "Succeeded" else "Warning", f"MPIJob{outcome}", message
                )
            )

        if finished or outcome:
            deletes.extend(kubeflow.cleanup_pods(workers.values(), clean))
        elif suspend:
            deletes.extend(
                objects.ref_to(p) for p in workers.values() if objects.pod_state(p) is not objects.PodState.TERMINATING
            )
            if launcher is not None:
                deletes.append(objects.ref_to(launcher))
        else:
            for _, pod in sorted(workers.items()):
                if objects.pod_state(pod) is objects.PodState.FAILED and w_restart != "Never":
                    deletes.append(objects.ref_to(pod))
            for index in range(worker_replicas):
                if index not in workers:
                    creates.append(self._worker(owner, index, w_labels, w_annotations, w_spec, w_restart, names_))
            ready = len(workers) == worker_replicas and all(objects.pod_running(p) for p in workers.values())
            if launcher is None and (creation == "AtStartup" or ready):
                creates.append(self._launcher(owner, l_labels, l_annotations, l_spec, l_restart, backoff, names_))

        running = sum(1 for p in workers.values() if objects.pod_running(p))
        new_status: dict[str, Any] = {
            "conditions": conditions
            or [objects.condition("Created", reason="MPIJobCreated", message=f"MPIJob {name} is created.")],
            "replicaStatuses": {
                "Launcher": {"active": 1 if launcher is not None and not outcome and not finished else 0},
                "Worker": {"active": running},
            },
        }
        return model.Reconciliation(
            create=tuple(creates),
            delete=tuple(deletes),
            status=objects.status_change(owner, new_status),
            events=tuple(events),
        )

    @staticmethod
    def _worker(
        owner: model.Obj,
        index: int,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        pod_spec: Mapping[str, Any],
        restart: str,
        names_: model.NameSource,
    ) -> dict[str, Any]:
        name = objects.name_of(owner)
        pod_name = f"{name}-worker-{index}"
        spec = dict(pod_spec)
        spec["hostname"] = pod_name
        spec["subdomain"] = name
        spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
        return objects.build_pod(
            owner=owner,
            name=pod_name,
            generate_name=None,
            uid=names_.uid(scope=objects.uid_of(owner)),
            labels={
                **labels,
                kubeflow.OPERATOR_NAME_LABEL: "mpi-operator",
                kubeflow.JOB_NAME_LABEL: name,
                kubeflow.JOB_ROLE_LABEL: "worker",
                kubeflow.REPLICA_INDEX_LABEL: str(index),
            },
            annotations=annotations,
            spec=spec,
        )

    @staticmethod
    def _launcher(
        owner: model.Obj,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        pod_spec: Mapping[str, Any],
        restart: str,
        backoff: int | None,
        names_: model.NameSource,
    ) -> dict[str, Any]:
        name = objects.name_of(owner)
        launcher_name = f"{name}-launcher"
        spec = dict(pod_spec)
        spec["hostname"] = launcher_name
        spec["subdomain"] = name
        spec["restartPolicy"] = "OnFailure" if restart in ("OnFailure", "Always") else "Never"
        job_spec: dict[str, Any] = {
            "template": {
                "metadata": {
                    "labels": {
                        **labels,
                        kubeflow.OPERATOR_NAME_LABEL: "mpi-operator",
                        kubeflow.JOB_NAME_LABEL: name,
                        kubeflow.JOB_ROLE_LABEL: "launcher",
                    },
                    "annotations": dict(annotations),
                },
                "spec": spec,
            }
        }
        if backoff is not None:
            job_spec["backoffLimit"] = backoff
        return objects.new_object(
            api_version="batch/v1",
            kind="Job",
            name=launcher_name,
            namespace=objects.namespace_of(owner),
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels={"app": name},
            annotations={},
            spec=job_spec,
        )


def _launcher_outcome(job: model.Obj) -> str:
    if objects.condition_true(job, "Complete"):
        return "Succeeded"
    if objects.condition_true(job, "Failed"):
        return "Failed"
    return ""
