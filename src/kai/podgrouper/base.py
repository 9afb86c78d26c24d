"""The grouper contract and the default grouper that every per-kind grouper starts from.

A grouper is a pure function of a :class:`GroupingContext` (pod, owner chain, config and a read-only
view of related objects) to ``PodGroupMetadata`` or ``GroupingError``. The per-kind groupers in
``kai.podgrouper.groupers`` call :func:`default_metadata` and then adjust name, gang size and
subgroups, mirroring how KAI's plugins embed its ``DefaultGrouper``.

The default grouper (KAI ``defaultgrouper/default_grouper.go``) produces:
  * name ``pg-<topOwnerName>-<topOwnerUID>``, minMember 1, owner reference = the top owner;
  * queue, PriorityClass and preemptibility as in ``queues`` and ``priorities``;
  * labels = the top owner's labels, plus ``user`` from the pod when the owner has none;
  * annotations = ``user`` from the pod's annotations, ``kai.scheduler/top-owner-metadata`` (the top
    owner's identity as YAML), then all of the top owner's annotations;
  * topology constraint from the top owner's ``kai.scheduler/topology*`` annotations;
  * preemption delay, staleness grace period and safe-to-consolidate from the
    ``kai.scheduler/*`` annotations of the owners, then the pod (``workload_settings``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec
from msgspec.structs import replace

from kai.podgrouper import config as cfg
from kai.podgrouper import model, objects, priorities, queues, top_owner, workload_settings

# list_pods(namespace, match_labels) -> the pods in namespace carrying all of match_labels.
PodLister = Callable[[str, Mapping[str, str]], Sequence[Mapping[str, Any]]]


def _no_object(_namespace: str, _api_version: str, _kind: str, _name: str) -> Mapping[str, Any] | None:
    return None


def _no_pods(_namespace: str, _match_labels: Mapping[str, str]) -> Sequence[Mapping[str, Any]]:
    return ()


class ClusterView(msgspec.Struct, frozen=True, kw_only=True):
    """Read-only access to objects a grouper needs besides the owner chain.

    Used by the RayJob/RayService groupers (the RayCluster named in the owner's status) and the
    MPIJob grouper (whether the launcher pod exists yet). The caller supplies both functions from
    its object store; the defaults see an empty cluster.
    """

    lookup: top_owner.Lookup = _no_object
    list_pods: PodLister = _no_pods


EMPTY_VIEW = ClusterView()


class GroupingContext(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a grouper may read."""

    pod: objects.RawObject
    chain: top_owner.OwnerChain
    config: cfg.GrouperConfig
    view: ClusterView = EMPTY_VIEW


class Grouper(Protocol):
    """A per-kind pod grouper: a name for logs and a pure ``group`` function."""

    @property
    def name(self) -> str: ...

    def group(self, ctx: GroupingContext) -> model.GroupingResult: ...


class FunctionGrouper(msgspec.Struct, frozen=True, kw_only=True):
    """A :class:`Grouper` made from a plain function."""

    name: str
    fn: Callable[[GroupingContext], model.GroupingResult]

    def group(self, ctx: GroupingContext) -> model.GroupingResult:
        return self.fn(ctx)


def pod_group_name(*, obj: objects.RawObject, uid_of: objects.RawObject | None = None) -> str:
    """``pg-<name of obj>-<uid of uid_of, default obj>``, KAI's PodGroup naming scheme."""
    uid = objects.uid(uid_of if uid_of is not None else obj)
    return f"{cfg.POD_GROUP_NAME_PREFIX}-{objects.name(obj)}-{uid}"


def owner_reference(obj: objects.RawObject) -> model.OwnerReference:
    return model.OwnerReference(
        api_version=objects.api_version(obj),
        kind=objects.kind(obj),
        name=objects.name(obj),
        uid=objects.uid(obj),
    )


_YAML_KEYWORDS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"})


def _looks_numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _yaml_scalar(value: str) -> str:
    """A string as a YAML scalar: plain when it reads back as the same string, else double-quoted."""
    plain = (
        bool(value)
        and all(ch.isalnum() or ch in "-._/" for ch in value)
        and value[0] not in "-."
        and value.lower() not in _YAML_KEYWORDS
        and not _looks_numeric(value)
    )
    return value if plain else json.dumps(value)


def top_owner_metadata(obj: objects.RawObject) -> str:
    """The ``kai.scheduler/top-owner-metadata`` annotation: the top owner's identity as YAML."""
    api_version = objects.api_version(obj)
    fields = (
        ("name", objects.name(obj)),
        ("uid", objects.uid(obj)),
        ("group", objects.group_of(api_version)),
        ("version", objects.version_of(api_version)),
        ("kind", objects.kind(obj)),
    )
    return "".join(f"{key}: {_yaml_scalar(value)}\n" for key, value in fields)


def topology_from_annotations(
    notes: Mapping[str, str],
    *,
    required_key: str = cfg.TOPOLOGY_REQUIRED_ANNOTATION,
    preferred_key: str = cfg.TOPOLOGY_PREFERRED_ANNOTATION,
) -> model.TopologyConstraint | None:
    """A topology constraint from annotations, or None when none of the keys is set."""
    constraint = model.TopologyConstraint(
        topology=notes.get(cfg.TOPOLOGY_ANNOTATION, ""),
        required_level=notes.get(required_key, ""),
        preferred_level=notes.get(preferred_key, ""),
    )
    if not (constraint.topology or constraint.required_level or constraint.preferred_level):
        return None
    return constraint


def label_owners(ctx: GroupingContext, base: objects.RawObject) -> tuple[objects.RawObject, ...]:
    """Objects whose labels set priority and preemptibility: ``base``, then the other owners nearest first."""
    return (base, *(owner for owner in ctx.chain.owners if owner is not base))


def default_metadata(
    ctx: GroupingContext,
    *,
    base: objects.RawObject | None = None,
    kind_default_priority: str = cfg.TRAIN,
    priority_override: tuple[str, str] | None = None,
) -> model.GroupingResult:
    """The default grouper's PodGroup for ``ctx.pod``, based on ``base`` (default: the top owner).

    ``kind_default_priority`` and ``priority_override`` feed ``priorities.resolve_priority_class``.
    Pure, no side effects.
    """
    base_obj = ctx.chain.top_owner if base is None else base
    pod = ctx.pod
    queue, warnings = queues.resolve_queue(base=base_obj, pod=pod, config=ctx.config)
    owners = label_owners(ctx, base_obj)
    priority = priorities.resolve_priority_class(
        owners=owners,
        pod=pod,
        config=ctx.config,
        kind_default=kind_default_priority,
        override=priority_override,
    )
    if isinstance(priority, model.GroupingError):
        return replace(priority, warnings=warnings)
    preemptibility = priorities.resolve_preemptibility(owners=owners, pod=pod, config=ctx.config)
    if isinstance(preemptibility, model.GroupingError):
        return replace(preemptibility, warnings=warnings)

    base_labels = objects.labels(base_obj)
    pg_labels = dict(base_labels)
    pod_user = objects.labels(pod).get(cfg.USER_LABEL_KEY)
    if cfg.USER_LABEL_KEY not in pg_labels and pod_user is not None:
        pg_labels[cfg.USER_LABEL_KEY] = pod_user

    pg_annotations: dict[str, str] = {}
    annotated_user = objects.annotations(pod).get(cfg.USER_LABEL_KEY)
    if annotated_user is not None:
        pg_annotations[cfg.USER_LABEL_KEY] = annotated_user
    pg_annotations[cfg.TOP_OWNER_METADATA_ANNOTATION] = top_owner_metadata(base_obj)
    pg_annotations.update(objects.annotations(base_obj))
    settings = workload_settings.resolve(owners=owners, pod=pod)

    return model.PodGroupMetadata(
        name=pod_group_name(obj=base_obj),
        namespace=objects.namespace(pod),
        min_member=1,
        queue=queue,
        priority_class_name=priority,
        preemptibility=preemptibility,
        owner=owner_reference(base_obj),
        labels=pg_labels,
        annotations=pg_annotations,
        topology=topology_from_annotations(objects.annotations(base_obj)),
        preemption_delay=settings.preemption_delay,
        staleness_grace_period=settings.staleness_grace_period,
        safe_to_consolidate=settings.safe_to_consolidate,
        warnings=(*warnings, *settings.warnings),
    )


def workload_error(obj: objects.RawObject, problem: str, fix: str) -> model.GroupingError:
    """An ``InvalidWorkload`` error: the workload spec does not allow a gang to be computed."""
    return model.GroupingError(reason="InvalidWorkload", message=f"{objects.describe(obj)}: {problem}. To fix: {fix}.")
