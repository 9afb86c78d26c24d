"""Emulation of the apps/v1 controllers of kube-controller-manager: Deployment, ReplicaSet,
StatefulSet (facts from kubernetes/kubernetes pkg/controller/{deployment,replicaset,statefulset}).

* Deployment: owns one ReplicaSet `<deploy>-<pod-template-hash>` whose template and labels carry
  `pod-template-hash`. Templates do not change during a simulation, so there are no rollouts:
  an existing ReplicaSet of another template is left alone.
* ReplicaSet: keeps `spec.replicas` active pods `<rs>-<5 chars>`; terminal pods and pods being
  deleted do not count, so a lost or terminating pod is replaced at once under a new name.
  Extra active pods are deleted, unscheduled and pending ones first, then the newest.
* StatefulSet: pods `<sts>-<ordinal>` (from `spec.ordinals.start`), with labels
  `controller-revision-hash`, `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`,
  hostname = pod name and subdomain = `serviceName`. A missing pod is recreated under the same
  name once the old one is gone; terminal pods are deleted first. `OrderedReady` (the default)
  creates one pod at a time, only after every lower ordinal runs; `Parallel` creates all.
  StatefulSets of a LeaderWorkerSet also run the LWS webhook and pod-controller steps (see
  `lws`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kai.sim.controllers import lws, model, names, objects

POD_TEMPLATE_HASH = "pod-template-hash"
STS_REVISION_LABEL = "controller-revision-hash"
STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


class DeploymentController(objects.GuardedController):
    """apps/v1 Deployment: creates the ReplicaSet of the current template."""

    kind = "Deployment"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        replicas = objects.opt_int(spec, "replicas", path="spec", default=1)
        template = objects.required_template(spec, "template", path="spec")
        labels, annotations, pod_spec = objects.template_parts(template, path="spec.template")
        collisions = objects.opt_int(objects.status_of(owner), "collisionCount", path="status", default=0)
        selector = objects.opt_map(objects.opt_map(spec, "selector", path="spec"), "matchLabels", path="spec.selector")

        pod_hash = names.template_hash(dict(template), collision_count=collisions)
        rs_name = f"{objects.name_of(owner)}-{pod_hash}"
        sets = objects.children_of_kind(children, "ReplicaSet")
        if any(objects.name_of(rs) == rs_name for rs in sets):
            return model.Reconciliation()

        rs_labels = {**labels, POD_TEMPLATE_HASH: pod_hash}
        surge = math.ceil(replicas * 0.25)
        rs = objects.new_object(
            api_version="apps/v1",
            kind="ReplicaSet",
            name=rs_name,
            namespace=objects.namespace_of(owner),
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels=rs_labels,
            annotations={
                "deployment.kubernetes.io/desired-replicas": str(replicas),
                "deployment.kubernetes.io/max-replicas": str(replicas + surge),
                "deployment.kubernetes.io/revision": str(len(sets) + 1),
            },
            spec={
                "replicas": replicas,
                "selector": {"matchLabels": {**dict(selector), POD_TEMPLATE_HASH: pod_hash}},
                "template": {
                    "metadata": {"labels": rs_labels, "annotations": annotations},
                    "spec": pod_spec,
                },
            },
        )
        return model.Reconciliation(create=(rs,))


class ReplicaSetController(objects.GuardedController):
    """apps/v1 ReplicaSet: keeps `spec.replicas` active pods."""

    kind = "ReplicaSet"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        replicas = objects.opt_int(spec, "replicas", path="spec", default=1)
        template = objects.required_template(spec, "template", path="spec")
        labels, annotations, pod_spec = objects.template_parts(template, path="spec.template")

        pods = objects.children_of_kind(children, "Pod")
        active = [pod for pod in pods if objects.pod_state(pod) is objects.PodState.ACTIVE]
        diff = replicas - len(active)
        creates: list[dict[str, Any]] = []
        deletes: list[model.ObjectRef] = []
        name = objects.name_of(owner)
        scope = objects.uid_of(owner)
        taken = {objects.name_of(pod) for pod in pods}
        for _ in range(max(diff, 0)):
            pod_name = objects.unique_name(prefix=f"{name}-", taken=taken, names=names_, scope=scope)
            creates.append(
                objects.build_pod(
                    owner=owner,
                    name=pod_name,
                    generate_name=f"{name}-",
                    uid=names_.uid(scope=scope),
                    labels=labels,
                    annotations=annotations,
                    spec=pod_spec,
                )
            )
        if diff < 0:
            deletes = [objects.ref_to(pod) for pod in _deletion_order(active)[:-diff]]

        running = sum(1 for pod in active if objects.pod_running(pod))
        status = {
            "replicas": len(active) + len(creates),
            "readyReplicas": running,
            "availableReplicas": running,
        }
        return model.Reconciliation(
            create=tuple(creates), delete=tuple(deletes), status=objects.status_change(owner, status)
        )


def _deletion_order(pods: Sequence[model.Obj]) -> list[model.Obj]:
    """Scale-down order: unscheduled before scheduled, pending before running, newest first, name."""
    by_name = sorted(pods, key=objects.name_of, reverse=True)
    newest_first = sorted(by_name, key=lambda pod: str(objects.meta(pod).get("creationTimestamp") or ""), reverse=True)

    def rank(pod: model.Obj) -> tuple[bool, bool]:
        spec = pod.get("spec")
        scheduled = isinstance(spec, Mapping) and bool(spec.get("nodeName"))
        return scheduled, objects.pod_phase(pod) == "Running"

    return sorted(newest_first, key=rank)


class StatefulSetController(objects.GuardedController):
    """apps/v1 StatefulSet: pods with stable names `<sts>-<ordinal>`."""

    kind = "StatefulSet"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        replicas = objects.opt_int(spec, "replicas", path="spec", default=1)
        template = objects.required_template(spec, "template", path="spec")
        labels, annotations, pod_spec = objects.template_parts(template, path="spec.template")
        policy = objects.one_of(
            objects.opt_str(spec, "podManagementPolicy", path="spec", default="OrderedReady"),
            ("OrderedReady", "Parallel"),
            field="spec.podManagementPolicy",
        )
        start = objects.opt_int(
            objects.opt_map(spec, "ordinals", path="spec"), "start", path="spec.ordinals", default=0
        )
        service = objects.opt_str(spec, "serviceName", path="spec")
        name = objects.name_of(owner)
        namespace = objects.namespace_of(owner)
        revision = f"{name}-{names.template_hash(dict(template))}"
        wanted = range(start, start + replicas)
        tracking = objects.tracking_of(owner)
        created_before = [int(x) for x in tracking.get("created", ()) if isinstance(x, int)]

        # 1. Sort the pods into ordinals; pods outside the wanted range are scaled down.
        by_ordinal: dict[int, model.Obj] = {}
        deletes: list[model.ObjectRef] = []
        for pod in objects.children_of_kind(children, "Pod"):
            ordinal = _ordinal(objects.name_of(pod), name)
            if ordinal is None or ordinal not in wanted:
                if objects.pod_state(pod) is not objects.PodState.TERMINATING:
                    deletes.append(objects.ref_to(pod))
                continue
            by_ordinal[ordinal] = pod

        # 2. A worker StatefulSet of a LeaderWorkerSet restarts its whole group on a lost pod.
        if lws.group_restart(worker_sts=owner, pods_by_ordinal=by_ordinal, created=created_before):
            leader = lws.controlling_owner(owner)
            return model.Reconciliation(delete=(leader,) if leader is not None else ())

        # 3. Terminal pods are deleted; their replacement comes once the name is free.
        for pod in by_ordinal.values():
            if objects.terminal(pod):
                deletes.append(objects.ref_to(pod))

        # 4. Create missing pods: all at once (Parallel) or one at a time in order (OrderedReady).
        creates: list[dict[str, Any]] = []
        for ordinal in wanted:
            existing = by_ordinal.get(ordinal)
            if existing is not None:
                if policy == "OrderedReady" and not objects.pod_running(existing):
                    break
                continue
            creates.append(
                self._pod(
                    owner=owner,
                    ordinal=ordinal,
                    labels=labels,
                    annotations=annotations,
                    pod_spec=pod_spec,
                    revision=revision,
                    service=service,
                    namespace=namespace,
                    names_=names_,
                )
            )
            if policy == "OrderedReady":
                break

        # 5. Leader StatefulSets of a LeaderWorkerSet create the worker StatefulSets.
        new_tracking: dict[str, Any] = {}
        config = lws.worker_set_config(owner)
        if config:
            leaders = [by_ordinal[o] for o in sorted(by_ordinal)]
            worker_sets, handled = lws.worker_statefulsets(
                leader_sts=owner,
                config=config,
                leader_pods=leaders,
                handled=[str(x) for x in tracking.get("workerSetsFor", ())],
                names_=names_,
            )
            creates.extend(worker_sets)
            new_tracking["workerSetsFor"] = handled
        if lws.RESTART_POLICY_ANNOTATION in objects.annotations_of(owner):
            new_tracking["created"] = sorted(
                set(created_before) | {_ordinal_of(pod) for pod in creates if pod["kind"] == "Pod"}
            )

        live = [pod for pod in by_ordinal.values() if not objects.terminal(pod)]
        running = sum(1 for pod in live if objects.pod_running(pod))
        status: dict[str, Any] = {
            "replicas": len(live) + sum(1 for obj in creates if obj["kind"] == "Pod"),
            "readyReplicas": running,
            "availableReplicas": running,
            "currentRevision": revision,
            "updateRevision": revision,
        }
        if new_tracking:
            status[objects.TRACKING_KEY] = new_tracking
        return model.Reconciliation(
            create=tuple(creates), delete=tuple(deletes), status=objects.status_change(owner, status)
        )

    @staticmethod
    def _pod(
        *,
        owner: model.Obj,
        ordinal: int,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        pod_spec: Mapping[str, Any],
        revision: str,
        service: str,
        namespace: str,
        names_: model.NameSource,
    ) -> dict[str, Any]:
        pod_name = f"{objects.name_of(owner)}-{ordinal}"
        pod_labels = {
            **labels,
            STS_REVISION_LABEL: revision,
            STS_POD_NAME_LABEL: pod_name,
            STS_POD_INDEX_LABEL: str(ordinal),
        }
        lws.apply_pod_webhook(labels=pod_labels, pod_name=pod_name, namespace=namespace, ordinal=ordinal)
        spec = dict(pod_spec)
        spec["hostname"] = pod_name
        if service:
            spec["subdomain"] = service
        return objects.build_pod(
            owner=owner,
            name=pod_name,
            generate_name=None,
            uid=names_.uid(scope=objects.uid_of(owner)),
            labels=pod_labels,
            annotations=annotations,
            spec=spec,
        )


def _ordinal(pod_name: str, sts_name: str) -> int | None:
    prefix = f"{sts_name}-"
    if not pod_name.startswith(prefix):
        return None
    rest = pod_name[len(prefix) :]
    return int(rest) if rest.isdigit() else None


def _ordinal_of(pod: Mapping[str, Any]) -> int:
    return int(pod["metadata"]["labels"][STS_POD_INDEX_LABEL])
