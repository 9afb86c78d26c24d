"""Emulation of the KubeRay operator's RayJob and RayService controllers (ray.io/v1), installed with
`batchScheduler.name=kai-scheduler` (facts from ray-project/kuberay ray-operator/controllers/ray).

RayJob: creates the RayCluster `<rayjob>-<5>` (KubeRay's current naming; older releases used
`<rayjob>-raycluster-<5>`) with the RayJob's labels and annotations plus
`ray.io/originated-from-cr-name` / `ray.io/originated-from-crd: RayJob`, and records it in
`status.rayClusterName`. In K8sJobMode (the default) it creates the submitter Job `<rayjob>`
once the cluster is ready; the Job's pods get `schedulerName: kai-scheduler` and the RayJob's
queue label. Recent KubeRay releases make the KAI plugin refuse K8sJobMode (the submitter pod
comes after the gang); the simulator keeps the earlier behaviour and reports a Warning event.
The RayJob completes or fails with its submitter Job (give the submitter template a
`sim.kai.scheduler/duration`; a duration annotation on the RayJob itself is passed to the default
submitter template). HTTPMode, SidecarMode and InteractiveMode jobs run until the end of the
simulation. `shutdownAfterJobFinishes` deletes the cluster as soon as the job ends (the TTL is not
waited for); `backoffLimit` retries with a new cluster; `suspend` deletes cluster and submitter.

RayService: creates the RayCluster `<rayservice>-<5>`, recorded in
`status.pendingServiceStatus.rayClusterName` and moved to `status.activeServiceStatus` once the
cluster is ready; a lost cluster is replaced. Serve applications and upgrades are not emulated.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from kai.sim.controllers import model, names, objects, ray

_SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode")


def cluster_for(
    *,
    owner: model.Obj,
    cluster_name: str,
    crd: str,
    cluster_spec: Mapping[str, Any],
    extra_annotations: Mapping[str, str],
    names_: model.NameSource,
) -> dict[str, Any]:
    """A RayCluster created by a RayJob or RayService, labelled with its origin."""
    labels = {**objects.labels_of(owner), ray.ORIGIN_NAME_LABEL: objects.name_of(owner), ray.ORIGIN_CRD_LABEL: crd}
    return objects.new_object(
        api_version=objects.api_version_of(owner),
        kind="RayCluster",
        name=cluster_name,
        namespace=objects.namespace_of(owner),
        uid=names_.uid(scope=objects.uid_of(owner)),
        owner=owner,
        labels=labels,
        annotations={**objects.annotations_of(owner), **extra_annotations},
        spec=cluster_spec,
    )


def cluster_ready(cluster: model.Obj | None) -> bool:
    return cluster is not None and objects.status_of(cluster).get("state") == ray.READY


def job_finished(job: model.Obj) -> str:
    """ "Complete", "Failed" or "" for a batch Job."""
    if objects.condition_true(job, "Complete"):
        return "Complete"
    if objects.condition_true(job, "Failed"):
        return "Failed"
    return ""


def default_submitter_container(cluster_spec: Mapping[str, Any]) -> dict[str, Any]:
    head = cluster_spec.get("headGroupSpec")
    image = ""
    if isinstance(head, Mapping):
        template = head.get("template")
        if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
            containers = template["spec"].get("containers") or [{}]
            if containers and isinstance(containers[0], Mapping):
                image = str(containers[0].get("image", ""))
    return {
        "name": "ray-job-submitter",
        "image": image,
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }


class RayJobController(objects.GuardedController):
    """ray.io/v1 RayJob: its RayCluster, then (K8sJobMode) the submitter Job."""

    kind = "RayJob"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        mode = objects.one_of(
            objects.opt_str(spec, "submissionMode", path="spec", default="K8sJobMode"),
            _SUBMISSION_MODES,
            field="spec.submissionMode",
        )
        selector = objects.string_map(
            objects.opt_map(spec, "clusterSelector", path="spec"), field="spec.clusterSelector"
        )
        selected = selector.get(ray.CLUSTER_SELECTOR_KEY, "")
        if selector and not selected:
            raise objects.InvalidSpec(
                "spec.clusterSelector",
                f"must contain the key {ray.CLUSTER_SELECTOR_KEY}",
                "name the RayCluster to use",
            )
        cluster_spec: Mapping[str, Any] = {}
        if not selected:
            cluster_spec = objects.req_map(
                spec, "rayClusterSpec", path="spec", hint="add rayClusterSpec or a clusterSelector"
            )
            ray.parse_cluster_spec(cluster_spec, path="spec.rayClusterSpec")
        submitter: Mapping[str, Any] | None = None
        if spec.get("submitterPodTemplate") is not None:
            submitter = objects.required_template(spec, "submitterPodTemplate", path="spec")
            objects.template_parts(submitter, path="spec.submitterPodTemplate")
        suspend = objects.opt_bool(spec, "suspend", path="spec")
        shutdown = objects.opt_bool(spec, "shutdownAfterJobFinishes", path="spec")
        backoff = objects.opt_int_or_none(spec, "backoffLimit", path="spec")
        submitter_config = objects.opt_map(spec, "submitterConfig", path="spec")
        submitter_backoff = objects.opt_int(submitter_config, "backoffLimit", path="spec.submitterConfig", default=2)

        name = objects.name_of(owner)
        scope = objects.uid_of(owner)
        status: dict[str, Any] = dict(objects.status_of(owner))
        deployment = str(status.get("jobDeploymentStatus") or "New")
        clusters = {objects.name_of(c): c for c in objects.children_of_kind(children, "RayCluster")}
        jobs = {objects.name_of(j): j for j in objects.children_of_kind(children, "Job")}
        creates: list[dict[str, Any]] = []
        deletes: list[model.ObjectRef] = []
        events: list[model.Event] = []

        def event(type_: str, reason: str, message: str) -> None:
            events.append(
                model.Event(
                    type=type_,
                    reason=reason,
                    message=message,
                    kind=self.kind,
                    namespace=objects.namespace_of(owner),
                    name=name,
                )
            )

        def done() -> model.Reconciliation:
            return model.Reconciliation(
                create=tuple(creates),
                delete=tuple(deletes),
                status=objects.status_change(owner, status),
                events=tuple(events),
            )

        def delete_resources() -> None:
            if not selected:
                deletes.extend(objects.ref_to(c) for c in clusters.values())
            deletes.extend(objects.ref_to(j) for j in jobs.values())

        def reset(new_deployment: str) -> None:
            for key in ("rayClusterName", "jobId", "rayClusterStatus", "reason", "message"):
                status.pop(key, None)
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = new_deployment

        # 1. Suspension deletes the cluster and the submitter.
        if suspend:
            if deployment in ("New", "Initializing", "Running", "Waiting", "Suspended"):
                delete_resources()
                reset("Suspended")
            return done()
        if deployment == "Suspended":
            deployment = "New"

        # 2. New: choose the cluster name and job id.
        if deployment in ("New", "Retrying"):
            status["rayClusterName"] = selected or f"{name}-{names_.suffix(scope=scope)}"
            if mode != "InteractiveMode":
                status["jobId"] = objects.opt_str(spec, "jobId", path="spec") or f"{name}-{names_.suffix(scope=scope)}"
            status["jobStatus"] = ""
            deployment = "Initializing"
        status["jobDeploymentStatus"] = deployment
        cluster_name = str(status.get("rayClusterName", ""))
        cluster = clusters.get(cluster_name)
        finished = deployment in ("Complete", "Failed")

        # 3. Get or create the RayCluster (not in clusterSelector mode, not once finished).
        if not selected and cluster is None and not finished:
            cluster_copy = copy.deepcopy(dict(cluster_spec))
            if mode == "SidecarMode":
                head_template = cluster_copy["headGroupSpec"]["template"]
                head_template["spec"]["containers"] = [
                    *head_template["spec"]["containers"],
                    default_submitter_container(cluster_spec),
                ]
                head_template["spec"]["restartPolicy"] = "Never"
            creates.append(
                cluster_for(
                    owner=owner,
                    cluster_name=cluster_name,
                    crd=self.kind,
                    cluster_spec=cluster_copy,
                    extra_annotations={},
                    names_=names_,
                )
            )
            return done()
        if cluster is not None:
            status["rayClusterStatus"] = dict(objects.status_of(cluster))

        # 4. Initializing: wait for the cluster, then submit.
        if deployment == "Initializing":
            if not selected and not cluster_ready(cluster):
                return done()
            if mode == "K8sJobMode" and name not in jobs:
                creates.append(self._submitter_job(owner, cluster_spec, submitter, submitter_backoff, names_))
                event(
                    "Warning",
                    "KAISchedulerK8sJobMode",
                    "recent KubeRay releases refuse K8sJobMode with the kai-scheduler batch scheduler (the "
                    "submitter pod is created after the cluster's gang); the simulator submits it as earlier "
                    "releases did",
                )
            status["jobDeploymentStatus"] = "Waiting" if mode == "InteractiveMode" else "Running"
            status["jobStatus"] = "" if mode == "InteractiveMode" else "RUNNING"
            return done()

        # 5. Running: follow the submitter Job.
        if deployment == "Running" and mode == "K8sJobMode":
            job = jobs.get(name)
            outcome = "Failed" if job is None else job_finished(job)
            if outcome == "Complete":
                status.update(jobStatus="SUCCEEDED", jobDeploymentStatus="Complete")
                status["succeeded"] = int(status.get("succeeded") or 0) + 1
                event("Normal", "Completed", "the submitter Job completed")
            elif outcome == "Failed":
                reason = "submitter Job not found" if job is None else "the submitter Job failed"
                status.update(
                    jobStatus="FAILED",
                    jobDeploymentStatus="Failed",
                    reason="SubmissionFailed",
                    message=reason,
                )
                status["failed"] = int(status.get("failed") or 0) + 1
                event("Warning", "SubmissionFailed", reason)
            return done()

        # 6. Finished: retry within backoffLimit, else shut the cluster down if asked to.
        if deployment == "Failed" and backoff is not None and int(status.get("failed") or 0) < backoff + 1:
            delete_resources()
            reset("Retrying")
            return done()
        if finished and shutdown and not selected and cluster is not None:
            deletes.append(objects.ref_to(cluster))
        return done()

    def _submitter_job(
        self,
        owner: model.Obj,
        cluster_spec: Mapping[str, Any],
        submitter: Mapping[str, Any] | None,
        backoff_limit: int,
        names_: model.NameSource,
    ) -> dict[str, Any]:
        if submitter is not None:
            labels, annotations, spec = objects.template_parts(submitter, path="spec.submitterPodTemplate")
        else:
            labels, annotations = {}, {}
            spec = {"restartPolicy": "Never", "containers": [default_submitter_container(cluster_spec)]}
            duration = objects.annotations_of(owner).get(objects.DURATION_ANNOTATION)
            if duration is not None:
                annotations[objects.DURATION_ANNOTATION] = duration
        spec.setdefault("restartPolicy", "Never")
        ray.kai_metadata(labels=labels, spec=spec, parent=owner)
        name = objects.name_of(owner)
        return objects.new_object(
            api_version="batch/v1",
            kind="Job",
            name=name,
            namespace=objects.namespace_of(owner),
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels={
                ray.ORIGIN_NAME_LABEL: name,
                ray.ORIGIN_CRD_LABEL: self.kind,
                ray.CREATED_BY_LABEL: "kuberay-operator",
            },
            annotations={},
            spec={
                "backoffLimit": backoff_limit,
                "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec},
            },
        )


class RayServiceController(objects.GuardedController):
    """ray.io/v1 RayService: keeps one serving RayCluster."""

    kind = "RayService"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        cluster_spec = objects.req_map(spec, "rayClusterConfig", path="spec")
        ray.parse_cluster_spec(cluster_spec, path="spec.rayClusterConfig")
        status = objects.status_of(owner)
        active = service_cluster(status, "activeServiceStatus")
        pending = service_cluster(status, "pendingServiceStatus")
        clusters = {objects.name_of(c): c for c in objects.children_of_kind(children, "RayCluster")}
        creates: list[dict[str, Any]] = []

        if active and active not in clusters:
            active = ""
        if not active and not pending:
            pending = f"{objects.name_of(owner)}-{names_.suffix(scope=objects.uid_of(owner))}"
        if pending and pending not in clusters:
            creates.append(
                cluster_for(
                    owner=owner,
                    cluster_name=pending,
                    crd=self.kind,
                    cluster_spec=cluster_spec,
                    extra_annotations={
                        "ray.io/hash-without-replicas-and-workers-to-delete": spec_hash(cluster_spec),
                        "ray.io/num-worker-groups": str(len(cluster_spec.get("workerGroupSpecs") or ())),
                        "ray.io/enable-serve-service": "true",
                    },
                    names_=names_,
                )
            )
        elif pending and cluster_ready(clusters.get(pending)):
            active, pending = pending, ""

        new_status: dict[str, Any] = {
            "activeServiceStatus": {"rayClusterName": active} if active else {},
            "pendingServiceStatus": {"rayClusterName": pending} if pending else {},
            "serviceStatus": "Running" if active else "",
        }
        return model.Reconciliation(create=tuple(creates), status=objects.status_change(owner, new_status))


def service_cluster(status: Mapping[str, Any], key: str) -> str:
    part = status.get(key)
    if isinstance(part, Mapping) and isinstance(part.get("rayClusterName"), str):
        return str(part["rayClusterName"])
    return ""


def spec_hash(cluster_spec: Mapping[str, Any]) -> str:
    """KubeRay-shaped hash of a cluster spec without worker replicas (base32hex of SHA-1)."""
    stripped = copy.deepcopy(dict(cluster_spec))
    for group in stripped.get("workerGroupSpecs") or ():
        if isinstance(group, dict):
            for key in ("replicas", "minReplicas", "maxReplicas", "scaleStrategy"):
                group.pop(key, None)
    digest = hashlib.sha1(names.canonical_json(stripped).encode(), usedforsecurity=False).digest()
    return base64.b32hexencode(digest).decode()
