"""Emulation of the JobSet controller (jobset.x-k8s.io/v1alpha2, kubernetes-sigs/jobset).

* For each replicated job `rjob` and index `i < replicas`, a batch Job `<jobset>-<rjob>-<i>`
  (owned by the JobSet) from the replicated job's template. The JobSet webhook's defaults apply:
  `completionMode: Indexed` and pod `restartPolicy: OnFailure` when unset, and
  `network.enableDNSHostnames: true` (pods get subdomain `<jobset>` or `network.subdomain`).
  The Job controller then names pods `<jobset>-<rjob>-<i>-<podIndex>-<5>`.
* Job and pod template labels and annotations: `jobset.sigs.k8s.io/jobset-name`,
  `.../replicatedjob-name`, `.../replicatedjob-replicas`, `.../global-replicas`, `.../job-index`,
  `.../job-global-index`, `.../job-key` (SHA-1 of `<namespace>/<job>`), `.../restart-attempt`,
  and `.../coordinator` when `spec.coordinator` is set.
* `startupPolicy.startupPolicyOrder: InOrder` creates a replicated job's Jobs only after every
  Job of the previous one has all its pods ready (running) or succeeded; AnyOrder (default)
  creates all at once.
* `successPolicy` (operator All|Any over `targetReplicatedJobs`, default all) completes the
  JobSet. A failed Job restarts the whole JobSet while `status.restarts < failurePolicy.maxRestarts`
  (default 0): every Job is deleted and recreated with the next `restart-attempt`; past the
  limit the JobSet fails. `suspend` suspends the Jobs it creates.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kai.sim.controllers import model, names, objects

GROUP = "jobset.x-k8s.io"
JOBSET_NAME_KEY = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME_KEY = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS_KEY = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS_KEY = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX_KEY = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX_KEY = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
RESTARTS_KEY = "jobset.sigs.k8s.io/restart-attempt"
COORDINATOR_KEY = "jobset.sigs.k8s.io/coordinator"


class _ReplicatedJob(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    replicas: int
    labels: dict[str, str]
    annotations: dict[str, str]
    job_spec: dict[str, Any]
    pods_per_job: int


class JobSetController(objects.GuardedController):
    """jobset.x-k8s.io/v1alpha2 JobSet: its child Jobs."""

    kind = "JobSet"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        rjobs = _parse_replicated_jobs(spec)
        order = objects.one_of(
            objects.opt_str(
                objects.opt_map(spec, "startupPolicy", path="spec"),
                "startupPolicyOrder",
                path="spec.startupPolicy",
                default="AnyOrder",
            ),
            ("AnyOrder", "InOrder"),
            field="spec.startupPolicy.startupPolicyOrder",
        )
        success = objects.opt_map(spec, "successPolicy", path="spec")
        operator = objects.one_of(
            objects.opt_str(success, "operator", path="spec.successPolicy", default="All"),
            ("All", "Any"),
            field="spec.successPolicy.operator",
        )
        targets = [str(t) for t in objects.opt_list(success, "targetReplicatedJobs", path="spec.successPolicy")]
        known = {rjob.name for rjob in rjobs}
        for index, target in enumerate(targets):
            if target not in known:
                raise objects.InvalidSpec(
                    f"spec.successPolicy.targetReplicatedJobs[{index}]",
                    f"names no replicated job ({target!r})",
                    "use a replicated job name",
                )
        max_restarts = objects.opt_int(
            objects.opt_map(spec, "failurePolicy", path="spec"),
            "maxRestarts",
            path="spec.failurePolicy",
            default=0,
        )
        suspend = objects.opt_bool(spec, "suspend", path="spec")
        network = objects.opt_map(spec, "network", path="spec")
        dns = objects.opt_bool(network, "enableDNSHostnames", path="spec.network", default=True)
        subdomain = objects.opt_str(network, "subdomain", path="spec.network") or objects.name_of(owner)
        coordinator = objects.opt_map(spec, "coordinator", path="spec")

        status = objects.status_of(owner)
        restarts = status.get("restarts") if isinstance(status.get("restarts"), int) else 0
        assert isinstance(restarts, int)
        jobs = objects.children_of_kind(children, "Job")
        attempt = str(restarts)
        current = [job for job in jobs if objects.labels_of(job).get(RESTARTS_KEY, attempt) == attempt]
        previous = [job for job in jobs if job not in current]
        conditions = [
            c for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("type") != "Suspended"
        ]
        finished = objects.condition_true(owner, "Completed") or objects.condition_true(owner, "Failed")
        creates: list[dict[str, Any]] = []
        deletes = [objects.ref_to(job) for job in previous]
        events: list[model.Event] = []

        def outcome(job: model.Obj) -> str:
            if objects.condition_true(job, "Complete"):
                return "Complete"
            return "Failed" if objects.condition_true(job, "Failed") else ""

        # 1. Completed or failed already: nothing more to do.
        if not finished:
            failed = [job for job in current if outcome(job) == "Failed"]
            target_names = set(targets) or known
            succeeded = [
                job
                for job in current
                if outcome(job) == "Complete" and objects.labels_of(job).get(REPLICATED_JOB_NAME_KEY) in target_names
            ]
            expected = sum(rjob.replicas for rjob in rjobs if rjob.name in target_names)
            # 2. A failed Job restarts the JobSet, or fails it past maxRestarts.
            if failed and restarts < max_restarts:
                restarts += 1
                deletes.extend(objects.ref_to(job) for job in current)
                events.append(
                    objects.owner_event(owner, "Warning", "Restarting", f"restarting the JobSet (attempt {restarts})")
                )
            elif failed:
                message = (
                    f"jobset failed: job {objects.name_of(failed[0])} failed "
                    f"and maxRestarts ({max_restarts}) is reached"
                )
                conditions.append(objects.condition("Failed", reason="FailedJobs", message=message))
                events.append(objects.owner_event(owner, "Warning", "FailedJobs", message))
            # 3. The success policy completes it.
            elif (operator == "All" and expected and len(succeeded) >= expected) or (operator == "Any" and succeeded):
                conditions.append(
                    objects.condition("Completed", reason="AllJobsCompleted", message="jobset completed successfully")
                )
                events.append(objects.owner_event(owner, "Normal", "AllJobsCompleted", "jobset completed successfully"))
            # 4. Otherwise create the missing Jobs (in order under InOrder).
            else:
                taken = {objects.name_of(job) for job in jobs}
                by_name = {objects.name_of(job): job for job in current}
                for rjob in rjobs:
                    for index in range(rjob.replicas):
                        job_name = f"{objects.name_of(owner)}-{rjob.name}-{index}"
                        if job_name in taken:
                            continue
                        creates.append(
                            self._job(
                                owner,
                                rjobs,
                                rjob,
                                index,
                                restarts,
                                suspend,
                                dns,
                                subdomain,
                                coordinator,
                                names_,
                            )
                        )
                    if order == "InOrder" and not all(
                        _started(by_name.get(f"{objects.name_of(owner)}-{rjob.name}-{i}"), rjob.pods_per_job)
                        for i in range(rjob.replicas)
                    ):
                        break

        new_status: dict[str, Any] = {
            "restarts": restarts,
            "replicatedJobsStatus": [_rjob_status(rjob, current) for rjob in rjobs],
        }
        if conditions:
            new_status["conditions"] = conditions
        if suspend:
            new_status["conditions"] = [
                *conditions,
                objects.condition("Suspended", reason="SuspendedJobs", message="jobset is suspended"),
            ]
        return model.Reconciliation(
            create=tuple(creates),
            delete=tuple(deletes),
            status=objects.status_change(owner, new_status),
            events=tuple(events),
        )

    def _job(
        self,
        owner: model.Obj,
        rjobs: Sequence[_ReplicatedJob],
        rjob: _ReplicatedJob,
        index: int,
        restarts: int,
        suspend: bool,
        dns: bool,
        subdomain: str,
        coordinator: Mapping[str, Any],
        names_: model.NameSource,
    ) -> dict[str, Any]:
        js_name = objects.name_of(owner)
        namespace = objects.namespace_of(owner)
        job_name = f"{js_name}-{rjob.name}-{index}"
        global_index = sum(r.replicas for r in rjobs[: rjobs.index(rjob)]) + index
        stamp = {
            JOBSET_NAME_KEY: js_name,
            REPLICATED_JOB_NAME_KEY: rjob.name,
            RESTARTS_KEY: str(restarts),
            REPLICATED_JOB_REPLICAS_KEY: str(rjob.replicas),
            GLOBAL_REPLICAS_KEY: str(sum(r.replicas for r in rjobs)),
            JOB_INDEX_KEY: str(index),
            JOB_KEY: names.sha1_hex(f"{namespace}/{job_name}"),
            JOB_GLOBAL_INDEX_KEY: str(global_index),
        }
        if coordinator:
            c_job = str(coordinator.get("replicatedJob", ""))
            c_index = int(coordinator.get("jobIndex") or 0)
            c_pod = int(coordinator.get("podIndex") or 0)
            stamp[COORDINATOR_KEY] = f"{js_name}-{c_job}-{c_index}-{c_pod}.{subdomain}"
        job_spec = copy.deepcopy(rjob.job_spec)
        pod_template = job_spec["template"]
        pod_meta = pod_template.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **stamp}
        pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **stamp}
        if dns:
            pod_template["spec"]["subdomain"] = subdomain
        job_spec["suspend"] = suspend
        return objects.new_object(
            api_version="batch/v1",
            kind="Job",
            name=job_name,
            namespace=namespace,
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels={**rjob.labels, **stamp},
            annotations={**rjob.annotations, **stamp},
            spec=job_spec,
        )


def _parse_replicated_jobs(spec: Mapping[str, Any]) -> list[_ReplicatedJob]:
    raw_jobs = objects.opt_list(spec, "replicatedJobs", path="spec")
    if not raw_jobs:
        raise objects.InvalidSpec(
            "spec.replicatedJobs", "must list at least one replicated job", "add a replicated job"
        )
    result: list[_ReplicatedJob] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_jobs):
        path = f"spec.replicatedJobs[{index}]"
        if not isinstance(raw, Mapping):
            raise objects.InvalidSpec(path, "must be a mapping", "describe the replicated job")
        name = objects.req_str(raw, "name", path=path)
        if name in seen:
            raise objects.InvalidSpec(f"{path}.name", f"repeats {name!r}", "give each replicated job a unique name")
        seen.add(name)
        replicas = objects.opt_int(raw, "replicas", path=path, default=1)
        template = objects.req_map(raw, "template", path=path, hint="add a Job template")
        job_meta = objects.opt_map(template, "metadata", path=f"{path}.template")
        labels = objects.string_map(
            objects.opt_map(job_meta, "labels", path=f"{path}.template.metadata"),
            field=f"{path}.template.metadata.labels",
        )
        annotations = objects.string_map(
            objects.opt_map(job_meta, "annotations", path=f"{path}.template.metadata"),
            field=f"{path}.template.metadata.annotations",
        )
        job_spec = copy.deepcopy(dict(objects.req_map(template, "spec", path=f"{path}.template")))
        pod_template = objects.required_template(job_spec, "template", path=f"{path}.template.spec")
        _, _, pod_spec = objects.template_parts(pod_template, path=f"{path}.template.spec.template")
        job_spec["template"] = dict(pod_template)
        job_spec["template"]["spec"] = {
            **pod_spec,
            "restartPolicy": pod_spec.get("restartPolicy") or "OnFailure",
        }
        job_spec.setdefault("completionMode", "Indexed")
        parallelism = objects.opt_int(job_spec, "parallelism", path=f"{path}.template.spec", default=1)
        completions = objects.opt_int_or_none(job_spec, "completions", path=f"{path}.template.spec")
        pods = parallelism if completions is None else min(parallelism, completions)
        result.append(
            _ReplicatedJob(
                name=name,
                replicas=replicas,
                labels=labels,
                annotations=annotations,
                job_spec=job_spec,
                pods_per_job=pods,
            )
        )
    return result


def _started(job: model.Obj | None, pods: int) -> bool:
    """A Job counts as started (InOrder) when its pods are all ready or succeeded."""
    if job is None:
        return False
    status = objects.status_of(job)
    ready = status.get("ready") if isinstance(status.get("ready"), int) else 0
    succeeded = status.get("succeeded") if isinstance(status.get("succeeded"), int) else 0
    assert isinstance(ready, int) and isinstance(succeeded, int)
    return ready + succeeded >= pods or objects.condition_true(job, "Complete")


def _rjob_status(rjob: _ReplicatedJob, jobs: Sequence[model.Obj]) -> dict[str, Any]:
    mine = [job for job in jobs if objects.labels_of(job).get(REPLICATED_JOB_NAME_KEY) == rjob.name]
    counts = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    for job in mine:
        if objects.condition_true(job, "Complete"):
            counts["succeeded"] += 1
        elif objects.condition_true(job, "Failed"):
            counts["failed"] += 1
        else:
            counts["active"] += 1
            if _started(job, rjob.pods_per_job):
                counts["ready"] += 1
    return {"name": rjob.name, **counts}
