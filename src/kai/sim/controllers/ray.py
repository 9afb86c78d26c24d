"""Emulation of the KubeRay operator (ray.io/v1 RayCluster, RayJob, RayService) installed with
`batchScheduler.name=kai-scheduler` (facts from ray-project/kuberay ray-operator/controllers/ray).

RayCluster:
* One head pod `<cluster>-head-<5>` and, per worker group, `replicas` (clamped to
  [minReplicas, maxReplicas], default min 0 / max 2^31-1) times `numOfHosts` worker pods
  `<cluster>-<group>-worker-<5>` (prefixes cut at 50 characters, lower-cased, as KubeRay does).
  Groups with `suspend: true` get no pods; `spec.suspend: true` deletes every pod.
* Pod labels: `ray.io/is-ray-node: yes`, `ray.io/cluster`, `ray.io/node-type` (head|worker),
  `ray.io/group` (`headgroup` or the group name), `ray.io/identifier` (`<cluster>-<type>`),
  `app.kubernetes.io/name: kuberay`, `app.kubernetes.io/created-by: kuberay-operator`; template
  labels override all but cluster, node-type and group.
* KubeRay's KAI plugin sets `schedulerName: kai-scheduler` on every pod and copies the
  RayCluster's non-empty `kai.scheduler/queue` label onto it. It copies nothing else: priority
  comes from the pod template's `priorityClassName` or from the RayCluster's `priorityClassName`
  / `ray.io/priority-class-name` labels, which KAI's pod grouper reads on the top owner.
* KubeRay also injects the `wait-gcs-ready` init container (200m CPU, 256Mi) into workers, the
  `autoscaler` sidecar (500m, 512Mi) into the head with `enableInTreeAutoscaling`, and the
  head annotation `ray.io/ft-enabled`. Other injected env vars, ports and probes are omitted.
* Lost pods are recreated (new random suffix) once gone; terminal pods are deleted first, and a
  pass that deletes a terminal pod creates nothing, as in KubeRay. Status `state: ready` is set
  once the head and all desired workers run, and stays (KubeRay never reverts it).

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
from dataclasses import dataclass
from typing import Any

from kai.sim.controllers import model, names, objects

GROUP = "ray.io"
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
IS_RAY_NODE_LABEL = "ray.io/is-ray-node"
IDENTIFIER_LABEL = "ray.io/identifier"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
APP_NAME_LABEL = "app.kubernetes.io/name"
CREATED_BY_LABEL = "app.kubernetes.io/created-by"
FT_ANNOTATION = "ray.io/ft-enabled"
HEAD_GROUP = "headgroup"
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
READY = "ready"
MAX_REPLICAS = 2147483647

_SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode")
_PROTECTED_LABELS = (NODE_TYPE_LABEL, GROUP_LABEL, CLUSTER_LABEL)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Group:
    """One worker group, validated."""

    name: str
    desired: int
    minimum: int
    maximum: int
    suspended: bool
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class _ClusterSpec:
    """A validated RayClusterSpec."""

    suspended: bool
    autoscaling: bool
    head_labels: dict[str, str]
    head_annotations: dict[str, str]
    head_spec: dict[str, Any]
    groups: tuple[_Group, ...]
    autoscaler_resources: Mapping[str, Any] | None


def _parse_cluster_spec(spec: Mapping[str, Any], *, path: str) -> _ClusterSpec:
    head = objects.req_map(spec, "headGroupSpec", path=path)
    head_path = f"{path}.headGroupSpec"
    head_template = objects.required_template(head, "template", path=head_path)
    labels, annotations, head_spec = objects.template_parts(head_template, path=f"{head_path}.template")
    labels.update(objects.string_map(objects.opt_map(head, "labels", path=head_path), field=f"{head_path}.labels"))
    groups: list[_Group] = []
    seen: set[str] = set()
    for index, raw in enumerate(objects.opt_list(spec, "workerGroupSpecs", path=path)):
        group_path = f"{path}.workerGroupSpecs[{index}]"
        if not isinstance(raw, Mapping):
            raise objects.InvalidSpec(group_path, "must be a mapping", "describe the worker group")
        group_name = objects.req_str(raw, "groupName", path=group_path)
        if group_name in seen:
            raise objects.InvalidSpec(
                f"{group_path}.groupName", f"repeats {group_name!r}", "give each group a unique name"
            )
        seen.add(group_name)
        replicas = objects.opt_int_or_none(raw, "replicas", path=group_path)
        minimum = objects.opt_int(raw, "minReplicas", path=group_path, default=0)
        maximum = objects.opt_int(raw, "maxReplicas", path=group_path, default=MAX_REPLICAS)
        hosts = objects.opt_int(raw, "numOfHosts", path=group_path, default=1, minimum=1)
        if minimum > maximum:
            raise objects.InvalidSpec(
                f"{group_path}.minReplicas",
                f"({minimum}) is greater than maxReplicas ({maximum})",
                "make minReplicas <= maxReplicas",
            )
        suspended = objects.opt_bool(raw, "suspend", path=group_path)
        template = objects.required_template(raw, "template", path=group_path)
        g_labels, g_annotations, g_spec = objects.template_parts(template, path=f"{group_path}.template")
        g_labels.update(
            objects.string_map(objects.opt_map(raw, "labels", path=group_path), field=f"{group_path}.labels")
        )
        count = min(max(minimum if replicas is None else replicas, minimum), maximum)
        groups.append(
            _Group(
                name=group_name,
                desired=0 if suspended else count * hosts,
                minimum=0 if suspended else minimum * hosts,
                maximum=0 if suspended else maximum * hosts,
                suspended=suspended,
                labels=g_labels,
                annotations=g_annotations,
                spec=g_spec,
            )
        )
    options = objects.opt_map(spec, "autoscalerOptions", path=path)
    resources = options.get("resources")
    return _ClusterSpec(
        suspended=objects.opt_bool(spec, "suspend", path=path),
        autoscaling=objects.opt_bool(spec, "enableInTreeAutoscaling", path=path),
        head_labels=labels,
        head_annotations=annotations,
        head_spec=head_spec,
        groups=tuple(groups),
        autoscaler_resources=resources if isinstance(resources, Mapping) else None,
    )


def _pod_labels(*, node_type: str, cluster: str, group: str, overrides: Mapping[str, str]) -> dict[str, str]:
    labels = {
        IS_RAY_NODE_LABEL: "yes",
        CLUSTER_LABEL: cluster,
        NODE_TYPE_LABEL: node_type,
        GROUP_LABEL: group,
        IDENTIFIER_LABEL: f"{cluster}-{node_type}"[-63:],
        APP_NAME_LABEL: "kuberay",
        CREATED_BY_LABEL: "kuberay-operator",
    }
    for key, value in overrides.items():
        if key not in _PROTECTED_LABELS:
            labels[key] = value
    return labels


def _kai_metadata(*, labels: dict[str, str], spec: dict[str, Any], parent: model.Obj) -> None:
    """KubeRay's KAI plugin: schedulerName, plus the parent's non-empty queue label (in place)."""
    spec["schedulerName"] = objects.KAI_SCHEDULER
    queue = objects.labels_of(parent).get(objects.QUEUE_LABEL, "")
    if queue:
        labels[objects.QUEUE_LABEL] = queue


def _generate_name(prefix: str, node_type: str) -> str:
    return f"{prefix[:50]}-{node_type}-".lower()


class RayClusterController:
    """ray.io/v1 RayCluster: the head pod and the worker groups' pods."""

    kind = "RayCluster"

    def reconcile(
        self, *, owner: model.Obj, children: Sequence[model.Obj], names: model.NameSource
    ) -> model.Reconciliation:
        return objects.guarded(owner, lambda: self._reconcile(owner, children, names))

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        cluster = _parse_cluster_spec(objects.spec_of(owner), path="spec")
        pods = objects.children_of_kind(children, "Pod")
        deletes: list[model.ObjectRef] = []
        creates: list[dict[str, Any]] = []
        taken = {objects.name_of(pod) for pod in pods}
        previous_state = objects.status_of(owner).get("state")

        def live(pod: model.Obj) -> bool:
            return objects.pod_state(pod) is not objects.PodState.TERMINATING

        # 1. A suspended cluster has no pods.
        if cluster.suspended:
            deletes = [objects.ref_to(pod) for pod in pods if live(pod)]
            status = self._status(owner, cluster, pods=[], state="suspended")
            return model.Reconciliation(delete=tuple(deletes), status=objects.status_change(owner, status))

        heads = [pod for pod in pods if objects.labels_of(pod).get(NODE_TYPE_LABEL) == "head"]
        workers: dict[str, list[model.Obj]] = {}
        for pod in pods:
            pod_labels = objects.labels_of(pod)
            if pod_labels.get(NODE_TYPE_LABEL) == "worker":
                workers.setdefault(pod_labels.get(GROUP_LABEL, ""), []).append(pod)

        def finish() -> model.Reconciliation:
            state = previous_state if isinstance(previous_state, str) and previous_state != "suspended" else ""
            if not creates and not deletes and self._all_running(cluster, heads, workers):
                state = READY
            status = self._status(owner, cluster, pods=pods, state=state)
            return model.Reconciliation(
                create=tuple(creates), delete=tuple(deletes), status=objects.status_change(owner, status)
            )

        # 2. Head: delete a terminal head (and stop), create a missing one, trim extras.
        terminal_heads = [pod for pod in heads if objects.terminal(pod)]
        if terminal_heads:
            deletes.extend(objects.ref_to(pod) for pod in terminal_heads)
            return finish()
        if not heads:
            creates.append(self._head_pod(owner, cluster, taken=taken, names_=names_))
        elif len(heads) > 1:
            keep = next((pod for pod in heads if live(pod)), heads[0])
            deletes.extend(objects.ref_to(pod) for pod in heads if pod is not keep and live(pod))

        # 3. Worker groups, in spec order; deleting terminal pods ends the pass.
        for group in cluster.groups:
            group_pods = workers.get(group.name, [])
            if group.suspended:
                deletes.extend(objects.ref_to(pod) for pod in group_pods if live(pod))
                continue
            broken = [pod for pod in group_pods if objects.terminal(pod)]
            if broken:
                deletes.extend(objects.ref_to(pod) for pod in broken)
                return finish()
            diff = group.desired - len(group_pods)
            for _ in range(max(diff, 0)):
                creates.append(self._worker_pod(owner, group, taken=taken, names_=names_))
            if diff < 0 and not cluster.autoscaling:
                removable = [pod for pod in group_pods if live(pod)]
                deletes.extend(objects.ref_to(pod) for pod in removable[:-diff])
        return finish()

    @staticmethod
    def _all_running(
        cluster: _ClusterSpec, heads: Sequence[model.Obj], workers: Mapping[str, Sequence[model.Obj]]
    ) -> bool:
        if len(heads) != 1 or not objects.pod_running(heads[0]):
            return False
        for group in cluster.groups:
            group_pods = workers.get(group.name, ())
            if len(group_pods) != group.desired or not all(objects.pod_running(pod) for pod in group_pods):
                return False
        return True

    @staticmethod
    def _status(owner: model.Obj, cluster: _ClusterSpec, *, pods: Sequence[model.Obj], state: str) -> dict[str, Any]:
        running_workers = [
            pod for pod in pods if objects.labels_of(pod).get(NODE_TYPE_LABEL) == "worker" and objects.pod_running(pod)
        ]
        heads = [pod for pod in pods if objects.labels_of(pod).get(NODE_TYPE_LABEL) == "head"]
        status: dict[str, Any] = {
            "desiredWorkerReplicas": sum(group.desired for group in cluster.groups),
            "minWorkerReplicas": sum(group.minimum for group in cluster.groups),
            "maxWorkerReplicas": min(sum(group.maximum for group in cluster.groups), MAX_REPLICAS),
            "readyWorkerReplicas": len(running_workers),
            "availableWorkerReplicas": len(running_workers),
        }
        if state:
            status["state"] = state
        if heads:
            status["head"] = {"podName": objects.name_of(heads[0])}
        return status

    @staticmethod
    def _head_pod(
        owner: model.Obj, cluster: _ClusterSpec, *, taken: set[str], names_: model.NameSource
    ) -> dict[str, Any]:
        name = objects.name_of(owner)
        labels = _pod_labels(node_type="head", cluster=name, group=HEAD_GROUP, overrides=cluster.head_labels)
        spec = copy.deepcopy(cluster.head_spec)
        _kai_metadata(labels=labels, spec=spec, parent=owner)
        ft_enabled = (
            objects.annotations_of(owner).get(FT_ANNOTATION, "").lower() == "true"
            or objects.spec_of(owner).get("gcsFaultToleranceOptions") is not None
        )
        annotations = {**cluster.head_annotations, FT_ANNOTATION: "true" if ft_enabled else "false"}
        if cluster.autoscaling:
            resources = cluster.autoscaler_resources or {
                "limits": {"cpu": "500m", "memory": "512Mi"},
                "requests": {"cpu": "500m", "memory": "512Mi"},
            }
            image = (spec.get("containers") or [{}])[0].get("image", "")
            spec["containers"] = [
                *spec.get("containers", []),
                {"name": "autoscaler", "image": image, "resources": copy.deepcopy(dict(resources))},
            ]
        prefix = _generate_name(name, "head")
        pod_name = objects.unique_name(prefix=prefix, taken=taken, names=names_, scope=objects.uid_of(owner))
        return objects.build_pod(
            owner=owner,
            name=pod_name,
            generate_name=prefix,
            uid=names_.uid(scope=objects.uid_of(owner)),
            labels=labels,
            annotations=annotations,
            spec=spec,
        )

    @staticmethod
    def _worker_pod(owner: model.Obj, group: _Group, *, taken: set[str], names_: model.NameSource) -> dict[str, Any]:
        name = objects.name_of(owner)
        labels = _pod_labels(node_type="worker", cluster=name, group=group.name, overrides=group.labels)
        spec = copy.deepcopy(group.spec)
        _kai_metadata(labels=labels, spec=spec, parent=owner)
        first = (spec.get("containers") or [{}])[0]
        spec["initContainers"] = [
            *spec.get("initContainers", []),
            {
                "name": "wait-gcs-ready",
                "image": first.get("image", ""),
                "resources": {
                    "limits": {"cpu": "200m", "memory": "256Mi"},
                    "requests": {"cpu": "200m", "memory": "256Mi"},
                },
            },
        ]
        prefix = _generate_name(f"{name}-{group.name}", "worker")
        pod_name = objects.unique_name(prefix=prefix, taken=taken, names=names_, scope=objects.uid_of(owner))
        return objects.build_pod(
            owner=owner,
            name=pod_name,
            generate_name=prefix,
            uid=names_.uid(scope=objects.uid_of(owner)),
            labels=labels,
            annotations=group.annotations,
            spec=spec,
        )


def _cluster_for(
    *,
    owner: model.Obj,
    cluster_name: str,
    crd: str,
    cluster_spec: Mapping[str, Any],
    extra_annotations: Mapping[str, str],
    names_: model.NameSource,
) -> dict[str, Any]:
    """A RayCluster created by a RayJob or RayService, labelled with its origin."""
    labels = {**objects.labels_of(owner), ORIGIN_NAME_LABEL: objects.name_of(owner), ORIGIN_CRD_LABEL: crd}
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


def _cluster_ready(cluster: model.Obj | None) -> bool:
    return cluster is not None and objects.status_of(cluster).get("state") == READY


def _job_finished(job: model.Obj) -> str:
    """ "Complete", "Failed" or "" for a batch Job."""
    if objects.condition_true(job, "Complete"):
        return "Complete"
    if objects.condition_true(job, "Failed"):
        return "Failed"
    return ""


def _default_submitter_container(cluster_spec: Mapping[str, Any]) -> dict[str, Any]:
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


class RayJobController:
    """ray.io/v1 RayJob: its RayCluster, then (K8sJobMode) the submitter Job."""

    kind = "RayJob"

    def reconcile(
        self, *, owner: model.Obj, children: Sequence[model.Obj], names: model.NameSource
    ) -> model.Reconciliation:
        return objects.guarded(owner, lambda: self._reconcile(owner, children, names))

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
        selected = selector.get(CLUSTER_SELECTOR_KEY, "")
        if selector and not selected:
            raise objects.InvalidSpec(
                "spec.clusterSelector",
                f"must contain the key {CLUSTER_SELECTOR_KEY}",
                "name the RayCluster to use",
            )
        cluster_spec: Mapping[str, Any] = {}
        if not selected:
            cluster_spec = objects.req_map(
                spec, "rayClusterSpec", path="spec", hint="add rayClusterSpec or a clusterSelector"
            )
            _parse_cluster_spec(cluster_spec, path="spec.rayClusterSpec")
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
                    _default_submitter_container(cluster_spec),
                ]
                head_template["spec"]["restartPolicy"] = "Never"
            creates.append(
                _cluster_for(
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
            if not selected and not _cluster_ready(cluster):
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
            outcome = "Failed" if job is None else _job_finished(job)
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
            spec = {"restartPolicy": "Never", "containers": [_default_submitter_container(cluster_spec)]}
            duration = objects.annotations_of(owner).get(objects.DURATION_ANNOTATION)
            if duration is not None:
                annotations[objects.DURATION_ANNOTATION] = duration
        spec.setdefault("restartPolicy", "Never")
        _kai_metadata(labels=labels, spec=spec, parent=owner)
        name = objects.name_of(owner)
        return objects.new_object(
            api_version="batch/v1",
            kind="Job",
            name=name,
            namespace=objects.namespace_of(owner),
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels={
                ORIGIN_NAME_LABEL: name,
                ORIGIN_CRD_LABEL: self.kind,
                CREATED_BY_LABEL: "kuberay-operator",
            },
            annotations={},
            spec={
                "backoffLimit": backoff_limit,
                "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec},
            },
        )


class RayServiceController:
    """ray.io/v1 RayService: keeps one serving RayCluster."""

    kind = "RayService"

    def reconcile(
        self, *, owner: model.Obj, children: Sequence[model.Obj], names: model.NameSource
    ) -> model.Reconciliation:
        return objects.guarded(owner, lambda: self._reconcile(owner, children, names))

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        cluster_spec = objects.req_map(spec, "rayClusterConfig", path="spec")
        _parse_cluster_spec(cluster_spec, path="spec.rayClusterConfig")
        status = objects.status_of(owner)
        active = _service_cluster(status, "activeServiceStatus")
        pending = _service_cluster(status, "pendingServiceStatus")
        clusters = {objects.name_of(c): c for c in objects.children_of_kind(children, "RayCluster")}
        creates: list[dict[str, Any]] = []

        if active and active not in clusters:
            active = ""
        if not active and not pending:
            pending = f"{objects.name_of(owner)}-{names_.suffix(scope=objects.uid_of(owner))}"
        if pending and pending not in clusters:
            creates.append(
                _cluster_for(
                    owner=owner,
                    cluster_name=pending,
                    crd=self.kind,
                    cluster_spec=cluster_spec,
                    extra_annotations={
                        "ray.io/hash-without-replicas-and-workers-to-delete": _spec_hash(cluster_spec),
                        "ray.io/num-worker-groups": str(len(cluster_spec.get("workerGroupSpecs") or ())),
                        "ray.io/enable-serve-service": "true",
                    },
                    names_=names_,
                )
            )
        elif pending and _cluster_ready(clusters.get(pending)):
            active, pending = pending, ""

        new_status: dict[str, Any] = {
            "activeServiceStatus": {"rayClusterName": active} if active else {},
            "pendingServiceStatus": {"rayClusterName": pending} if pending else {},
            "serviceStatus": "Running" if active else "",
        }
        return model.Reconciliation(create=tuple(creates), status=objects.status_change(owner, new_status))


def _service_cluster(status: Mapping[str, Any], key: str) -> str:
    part = status.get(key)
    if isinstance(part, Mapping) and isinstance(part.get("rayClusterName"), str):
        return str(part["rayClusterName"])
    return ""


def _spec_hash(cluster_spec: Mapping[str, Any]) -> str:
    """KubeRay-shaped hash of a cluster spec without worker replicas (base32hex of SHA-1)."""
    stripped = copy.deepcopy(dict(cluster_spec))
    for group in stripped.get("workerGroupSpecs") or ():
        if isinstance(group, dict):
            for key in ("replicas", "minReplicas", "maxReplicas", "scaleStrategy"):
                group.pop(key, None)
    digest = hashlib.sha1(names.canonical_json(stripped).encode(), usedforsecurity=False).digest()
    return base64.b32hexencode(digest).decode()
