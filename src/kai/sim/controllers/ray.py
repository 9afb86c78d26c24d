"""Emulation of the KubeRay operator's RayCluster controller (ray.io/v1), installed with
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

RayJob and RayService live in `ray_jobs`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kai.sim.controllers import model, objects

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

_PROTECTED_LABELS = (NODE_TYPE_LABEL, GROUP_LABEL, CLUSTER_LABEL)


class WorkerGroup(msgspec.Struct, frozen=True, kw_only=True):
    """One worker group, validated."""

    name: str
    desired: int
    minimum: int
    maximum: int
    suspended: bool
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]


class ClusterSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A validated RayClusterSpec."""

    suspended: bool
    autoscaling: bool
    head_labels: dict[str, str]
    head_annotations: dict[str, str]
    head_spec: dict[str, Any]
    groups: tuple[WorkerGroup, ...]
    autoscaler_resources: Mapping[str, Any] | None


def parse_cluster_spec(spec: Mapping[str, Any], *, path: str) -> ClusterSpec:
    head = objects.req_map(spec, "headGroupSpec", path=path)
    head_path = f"{path}.headGroupSpec"
    head_template = objects.required_template(head, "template", path=head_path)
    labels, annotations, head_spec = objects.template_parts(head_template, path=f"{head_path}.template")
    labels.update(objects.string_map(objects.opt_map(head, "labels", path=head_path), field=f"{head_path}.labels"))
    groups: list[WorkerGroup] = []
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
            WorkerGroup(
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
    return ClusterSpec(
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


def kai_metadata(*, labels: dict[str, str], spec: dict[str, Any], parent: model.Obj) -> None:
    """KubeRay's KAI plugin: schedulerName, plus the parent's non-empty queue label (in place)."""
    spec["schedulerName"] = objects.KAI_SCHEDULER
    queue = objects.labels_of(parent).get(objects.QUEUE_LABEL, "")
    if queue:
        labels[objects.QUEUE_LABEL] = queue


def _generate_name(prefix: str, node_type: str) -> str:
    return f"{prefix[:50]}-{node_type}-".lower()


class RayClusterController(objects.GuardedController):
    """ray.io/v1 RayCluster: the head pod and the worker groups' pods."""

    kind = "RayCluster"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        cluster = parse_cluster_spec(objects.spec_of(owner), path="spec")
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
        cluster: ClusterSpec, heads: Sequence[model.Obj], workers: Mapping[str, Sequence[model.Obj]]
    ) -> bool:
        if len(heads) != 1 or not objects.pod_running(heads[0]):
            return False
        for group in cluster.groups:
            group_pods = workers.get(group.name, ())
            if len(group_pods) != group.desired or not all(objects.pod_running(pod) for pod in group_pods):
                return False
        return True

    @staticmethod
    def _status(owner: model.Obj, cluster: ClusterSpec, *, pods: Sequence[model.Obj], state: str) -> dict[str, Any]:
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
        owner: model.Obj, cluster: ClusterSpec, *, taken: set[str], names_: model.NameSource
    ) -> dict[str, Any]:
        name = objects.name_of(owner)
        labels = _pod_labels(node_type="head", cluster=name, group=HEAD_GROUP, overrides=cluster.head_labels)
        spec = copy.deepcopy(cluster.head_spec)
        kai_metadata(labels=labels, spec=spec, parent=owner)
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
    def _worker_pod(
        owner: model.Obj, group: WorkerGroup, *, taken: set[str], names_: model.NameSource
    ) -> dict[str, Any]:
        name = objects.name_of(owner)
        labels = _pod_labels(node_type="worker", cluster=name, group=group.name, overrides=group.labels)
        spec = copy.deepcopy(group.spec)
        kai_metadata(labels=labels, spec=spec, parent=owner)
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
