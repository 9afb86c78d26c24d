"""Emulation of the LeaderWorkerSet operator (leaderworkerset.x-k8s.io/v1, kubernetes-sigs/lws).

What is emulated (facts from the LWS controllers and webhook):

* The LWS controller creates a leader StatefulSet named `<lws>` (replicas = `spec.replicas`,
  Parallel pod management, service `<lws>`); its pods `<lws>-<group>` carry the leader template
  (or the worker template when no leader template is given) plus the labels
  `leaderworkerset.sigs.k8s.io/name`, `.../worker-index: "0"`, `.../template-revision-hash` and
  the annotation `leaderworkerset.sigs.k8s.io/size`.
* The LWS pod webhook then labels leader pods with `.../group-index` (their ordinal) and
  `.../group-key` (SHA-1 of `<namespace>/<pod>`), and worker pods with `.../worker-index` (their
  ordinal). In the simulator the StatefulSet controller applies these mutations when it stamps
  a pod whose template carries the LWS name label (`apply_pod_webhook`).
* The LWS pod controller creates, for each leader pod, a worker StatefulSet named after the
  leader pod, owned by the leader pod, with `size - 1` replicas and ordinals starting at 1, so
  workers are `<lws>-<group>-<i>`. With `startupPolicy: LeaderReady` it waits until the leader
  pod runs. The real controller reads the LeaderWorkerSet; the simulator's controllers only see
  their own children, so the LWS controller stores what the pod controller needs in the leader
  StatefulSet's sim-only annotation `sim.kai.scheduler/lws-worker-set`, and the StatefulSet
  controller of that leader StatefulSet creates the worker StatefulSets (`worker_statefulsets`).
* `restartPolicy: RecreateGroupOnPodRestart` (the default): when a worker pod is lost or being
  deleted, the leader pod is deleted, which removes its worker StatefulSet (garbage collection by
  the store) and recreates the whole group (`group_restart`).

Not emulated: rolling updates, subgroups, exclusive placement affinities, headless services,
environment variables (`LWS_LEADER_ADDRESS`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kai.sim.controllers import model, names, objects

GROUP = "leaderworkerset.x-k8s.io"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
REPLICAS_ANNOTATION = "leaderworkerset.sigs.k8s.io/replicas"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
EXCLUSIVE_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"

# Sim-only: what the LWS pod controller needs, carried on the leader StatefulSet.
WORKER_SET_ANNOTATION = "sim.kai.scheduler/lws-worker-set"
# Sim-only: the LWS restart policy, carried on each worker StatefulSet.
RESTART_POLICY_ANNOTATION = "sim.kai.scheduler/lws-restart-policy"

RECREATE_GROUP = "RecreateGroupOnPodRestart"
_RESTART_POLICIES = (RECREATE_GROUP, "None", "Default")
_STARTUP_POLICIES = ("LeaderCreated", "LeaderReady")
_SUBDOMAIN_POLICIES = ("Shared", "UniquePerReplica")


class LeaderWorkerSetController(objects.GuardedController):
    """leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: creates the leader StatefulSet."""

    kind = "LeaderWorkerSet"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        replicas = objects.opt_int(spec, "replicas", path="spec", default=1)
        lwt = objects.req_map(spec, "leaderWorkerTemplate", path="spec")
        size = objects.opt_int(lwt, "size", path="spec.leaderWorkerTemplate", default=1, minimum=1)
        worker_template = objects.required_template(lwt, "workerTemplate", path="spec.leaderWorkerTemplate")
        objects.template_parts(worker_template, path="spec.leaderWorkerTemplate.workerTemplate")
        leader_template: Mapping[str, Any] = worker_template
        leader_path = "spec.leaderWorkerTemplate.workerTemplate"
        if lwt.get("leaderTemplate") is not None:
            leader_template = objects.required_template(lwt, "leaderTemplate", path="spec.leaderWorkerTemplate")
            leader_path = "spec.leaderWorkerTemplate.leaderTemplate"
        labels, annotations, pod_spec = objects.template_parts(leader_template, path=leader_path)
        restart = objects.one_of(
            objects.opt_str(lwt, "restartPolicy", path="spec.leaderWorkerTemplate", default=RECREATE_GROUP),
            _RESTART_POLICIES,
            field="spec.leaderWorkerTemplate.restartPolicy",
        )
        startup = objects.one_of(
            objects.opt_str(spec, "startupPolicy", path="spec", default="LeaderCreated"),
            _STARTUP_POLICIES,
            field="spec.startupPolicy",
        )
        network = objects.opt_map(spec, "networkConfig", path="spec")
        subdomain = objects.one_of(
            objects.opt_str(network, "subdomainPolicy", path="spec.networkConfig", default="Shared"),
            _SUBDOMAIN_POLICIES,
            field="spec.networkConfig.subdomainPolicy",
        )

        name = objects.name_of(owner)
        namespace = objects.namespace_of(owner)
        revision = names.template_hash({"leader": dict(leader_template), "worker": dict(worker_template)})
        sets = objects.children_of_kind(children, "StatefulSet")
        leader_sets = [sts for sts in sets if objects.name_of(sts) == name]
        status = {
            "replicas": replicas,
            "readyReplicas": _ready(leader_sets),
        }
        if leader_sets:
            return model.Reconciliation(status=objects.status_change(owner, status))

        # The leader StatefulSet does not exist yet: create it.
        pod_labels = {**labels, WORKER_INDEX_LABEL: "0", NAME_LABEL: name, REVISION_LABEL: revision}
        pod_annotations = {**annotations, SIZE_ANNOTATION: str(size)}
        lws_annotations = objects.annotations_of(owner)
        if EXCLUSIVE_ANNOTATION in lws_annotations:
            pod_annotations[EXCLUSIVE_ANNOTATION] = lws_annotations[EXCLUSIVE_ANNOTATION]
        worker_set = {
            "lwsName": name,
            "size": size,
            "revision": revision,
            "restartPolicy": restart,
            "startupPolicy": startup,
            "subdomainPolicy": subdomain,
            "workerTemplate": dict(worker_template),
        }
        leader_sts = objects.new_object(
            api_version="apps/v1",
            kind="StatefulSet",
            name=name,
            namespace=namespace,
            uid=names_.uid(scope=objects.uid_of(owner)),
            owner=owner,
            labels={NAME_LABEL: name, REVISION_LABEL: revision},
            annotations={
                REPLICAS_ANNOTATION: str(replicas),
                WORKER_SET_ANNOTATION: names.canonical_json(worker_set),
            },
            spec={
                "replicas": replicas,
                "serviceName": name,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {NAME_LABEL: name, WORKER_INDEX_LABEL: "0"}},
                "template": {
                    "metadata": {"labels": pod_labels, "annotations": pod_annotations},
                    "spec": pod_spec,
                },
            },
        )
        return model.Reconciliation(create=(leader_sts,), status=objects.status_change(owner, status))


def _ready(sets: Sequence[model.Obj]) -> int:
    for sts in sets:
        value = objects.status_of(sts).get("readyReplicas")
        if isinstance(value, int):
            return value
    return 0


def apply_pod_webhook(*, labels: dict[str, str], pod_name: str, namespace: str, ordinal: int) -> None:
    """Mutate a new StatefulSet pod's labels the way the LWS pod webhook does (in place)."""
    if NAME_LABEL not in labels:
        return
    if labels.get(WORKER_INDEX_LABEL) == "0":
        labels.setdefault(GROUP_INDEX_LABEL, str(ordinal))
        labels.setdefault(GROUP_KEY_LABEL, names.sha1_hex(f"{namespace}/{pod_name}"))
        return
    labels[WORKER_INDEX_LABEL] = str(ordinal)


def worker_set_config(sts: model.Obj) -> Mapping[str, Any] | None:
    """The sim-only LWS configuration carried by a leader StatefulSet, if any."""
    raw = objects.annotations_of(sts).get(WORKER_SET_ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise objects.InvalidSpec(
            f"metadata.annotations.{WORKER_SET_ANNOTATION}",
            f"is not valid JSON ({exc})",
            "let the LWS controller set it",
        ) from exc
    if not isinstance(value, Mapping):
        raise objects.InvalidSpec(
            f"metadata.annotations.{WORKER_SET_ANNOTATION}",
            "must be a JSON object",
            "let the LWS controller set it",
        )
    return value


def worker_statefulsets(
    *,
    leader_sts: model.Obj,
    config: Mapping[str, Any],
    leader_pods: Sequence[model.Obj],
    handled: Sequence[str],
    names_: model.NameSource,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Worker StatefulSets to create for leader pods, and the leader uids now handled.

    A leader pod gets its worker StatefulSet once (tracked by uid in the leader StatefulSet's
    bookkeeping): when it is active, not being deleted, size > 1, and, under LeaderReady, running.
    """
    size = int(config.get("size", 1))
    current = {objects.uid_of(pod) for pod in leader_pods}
    still_handled = sorted(uid for uid in handled if uid in current)
    if size <= 1:
        return [], still_handled
    creates: list[dict[str, Any]] = []
    done = set(still_handled)
    for pod in leader_pods:
        uid = objects.uid_of(pod)
        if not uid or uid in done or objects.pod_state(pod) is not objects.PodState.ACTIVE:
            continue
        if config.get("startupPolicy") == "LeaderReady" and not objects.pod_running(pod):
            continue
        creates.append(_worker_statefulset(leader_pod=pod, config=config, names_=names_, scope=leader_sts))
        done.add(uid)
    return creates, sorted(done)


def _worker_statefulset(
    *, leader_pod: model.Obj, config: Mapping[str, Any], names_: model.NameSource, scope: model.Obj
) -> dict[str, Any]:
    leader_name = objects.name_of(leader_pod)
    leader_labels = objects.labels_of(leader_pod)
    lws_name = str(config.get("lwsName", ""))
    size = int(config.get("size", 1))
    template = config.get("workerTemplate")
    template = template if isinstance(template, Mapping) else {}
    labels, annotations, pod_spec = objects.template_parts(template, path="spec.leaderWorkerTemplate.workerTemplate")
    group_labels = {
        GROUP_INDEX_LABEL: leader_labels.get(GROUP_INDEX_LABEL, ""),
        NAME_LABEL: lws_name,
        GROUP_KEY_LABEL: leader_labels.get(GROUP_KEY_LABEL, ""),
        REVISION_LABEL: leader_labels.get(REVISION_LABEL, str(config.get("revision", ""))),
    }
    pod_annotations = {**annotations, SIZE_ANNOTATION: str(size), LEADER_NAME_ANNOTATION: leader_name}
    service = leader_name if config.get("subdomainPolicy") == "UniquePerReplica" else lws_name
    return objects.new_object(
        api_version="apps/v1",
        kind="StatefulSet",
        name=leader_name,
        namespace=objects.namespace_of(leader_pod),
        uid=names_.uid(scope=objects.uid_of(scope)),
        owner=leader_pod,
        labels=group_labels,
        annotations={RESTART_POLICY_ANNOTATION: str(config.get("restartPolicy", RECREATE_GROUP))},
        spec={
            "replicas": size - 1,
            "serviceName": service,
            "podManagementPolicy": "Parallel",
            "ordinals": {"start": 1},
            "selector": {"matchLabels": {k: group_labels[k] for k in (GROUP_INDEX_LABEL, NAME_LABEL, GROUP_KEY_LABEL)}},
            "template": {
                "metadata": {"labels": {**labels, **group_labels}, "annotations": pod_annotations},
                "spec": pod_spec,
            },
        },
    )


def group_restart(*, worker_sts: model.Obj, pods_by_ordinal: Mapping[int, model.Obj], created: Sequence[int]) -> bool:
    """True when a worker StatefulSet under RecreateGroupOnPodRestart must restart its group.

    That is when a worker pod this StatefulSet created earlier is gone, terminal or being deleted.
    """
    policy = objects.annotations_of(worker_sts).get(RESTART_POLICY_ANNOTATION)
    if policy != RECREATE_GROUP:
        return False
    for ordinal in created:
        pod = pods_by_ordinal.get(ordinal)
        if pod is None or objects.pod_state(pod) is not objects.PodState.ACTIVE:
            return True
    return False


def controlling_owner(obj: model.Obj) -> model.ObjectRef | None:
    """The ObjectRef of `obj`'s controller owner (used to delete an LWS leader pod)."""
    for reference in objects.meta(obj).get("ownerReferences") or ():
        if isinstance(reference, Mapping) and reference.get("controller"):
            return model.ObjectRef(
                api_version=str(reference.get("apiVersion", "")),
                kind=str(reference.get("kind", "")),
                namespace=objects.namespace_of(obj),
                name=str(reference.get("name", "")),
                uid=str(reference.get("uid", "")),
            )
    return None
