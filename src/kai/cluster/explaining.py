"""Explaining a cycle for every adapter: the engine's facts about a cluster, and the explanations
that become the PodGroups' conditions, their pods' messages and their events.

The facts are what the engine needs beyond the snapshot: the workload behind each PodGroup (the pod
grouper's top-owner annotation, or the PodGroup itself when a user wrote it), the top owner of each
pod (the owner chain the pod grouper walks), whether a workload's queue label is missing (the pod
grouper's own hint), the priority classes, and a lookup of the objects as they were applied (for
merge patches). Pure.

Every cycle, every waiting PodGroup is explained: its reasons in explain's words (no dry run
needed), and its first verified fix where one is known. Fixes cost dry cycles, so a cycle spends a
bounded budget of them (`engine.cycle_dry_runs`, or what the adapter hands in), at most
`engine.CYCLE_DRY_RUNS_PER_JOB` per group, on the groups in line that have none yet; an adapter
whose cycles repeat (kai run) keeps what was found in a `FixMemory` while a group's reasons stay
the same, so every waiting group comes to carry its fix however many wait. `kai explain` looks at any job on
demand.

`kai explain`'s PodGroup and queue documents are built here for every adapter; each adapter says
when a waiting job would start (`Estimator`): the simulator simulates forward, a live cluster names
the condition that starts it (`live_estimates`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from kai.actions.allocate import UNSCHEDULABLE
from kai.api import podgroup as api_podgroup
from kai.cluster.grouping import config_for
from kai.cluster.state import ClusterState
from kai.core.decisions import CycleResult
from kai.core.model import Job, Snapshot
from kai.core.session import SchedulerConfig, Session
from kai.explain import analysis, dryruns, engine, model, render, suggest
from kai.explain import queues as queue_views
from kai.podgrouper import model as grouper_model
from kai.podgrouper import queues, top_owner

DEFAULT_QUEUE = "default-queue"

# the waiting jobs' explanations -> per PodGroup namespace/name: when it would start (an adapter that
# simulates forward may assume a job's first fix made now, where it does not start without one)
Estimator = Callable[[Sequence[model.Explanation]], Mapping[str, model.Estimate]]

# What starts a waiting job, by its dominant reason, where no simulation can give a time.
STARTS_WHEN = {
    model.WAITING_FOR_VICTIMS: "once its victim pods have terminated",
    model.GANG_DOES_NOT_FIT: "once enough room is free at once on the nodes it may use",
    model.FRAGMENTED: "once one node has room for its largest pod",
    model.OVER_LIMIT: "once its queue holds little enough to stay within the limit",
    model.NON_PREEMPTIBLE_OVER_QUOTA: "once its queue's non-preemptible work leaves room within the quota",
    model.QUEUED_BEHIND: "when its turn comes in a coming cycle",
    model.PREEMPTION_DELAY_NOT_ELAPSED: "once its preemption delay has elapsed and it may evict",
}


class NotFound(LookupError):
    """The object to explain does not exist."""


def _key(obj: Mapping[str, Any], namespace: str) -> model.ObjectKey:
    meta = obj.get("metadata") or {}
    return model.ObjectKey(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        namespace=str(meta.get("namespace") or namespace),
        name=str(meta.get("name", "")),
    )


# pods of one namespace and PodGroup (None: none), by name, as `facts` reads them
PodsOfGroup = tuple[str, str | None, Sequence[str]]


def _by_group(state: ClusterState) -> list[PodsOfGroup]:
    """Every pod of ours, as runs of pods in a row of one namespace and PodGroup, in the state's order."""
    ours, _ = state.pod_states()
    runs: list[PodsOfGroup] = []
    names: list[str] = []
    for p in ours:
        namespace, podgroup = p.pod.meta.namespace, p.podgroup
        if not runs or runs[-1][0] != namespace or runs[-1][1] != podgroup:
            names = []
            runs.append((namespace, podgroup, names))
        names.append(p.pod.meta.name)
    return runs


def facts(
    state: ClusterState,
    config: SchedulerConfig,
    pods: Iterable[PodsOfGroup] | None = None,
    *,
    owners: bool = True,
    pod_end: model.PodEnd = model.no_known_end,
    lazy_owners: bool = False,
) -> model.Facts:
    """The facts of the cluster state as it is now, for the given pods: (namespace, PodGroup name or None,
    pod names) of each PodGroup, and their PodGroups; by default every pod of ours and every PodGroup. With
    `owners=False` the pods' top owners (which only a fix's patches need) are left out, and an owner
    chain is walked only where a queue label may be missing. With `lazy_owners` the top owner of any
    other pod is found when a patch asks for it (through `state.lookup`: an adapter whose lookups
    are safe wherever the engine runs, as the simulator's and kai run's cache's one-read lookups of
    objects replaced whole are); `pod_end`: when running pods end by themselves, if known."""
    grouper_config = config_for(config.queue_label_key, state.priority_class_objects())
    groups: set[str] | None = None  # the PodGroups whose facts are wanted; None: all
    if pods is None:
        pods = _by_group(state)
    else:
        pods = list(pods)
        groups = {f"{namespace}/{podgroup}" for namespace, podgroup, _ in pods if podgroup is not None}
    podgroups = [pg for pg in state.podgroup_objects() if groups is None or f"{pg.meta.namespace}/{pg.name}" in groups]
    # PodGroups the pod grouper made (a user's own PodGroup names its queue: no label can be missing)
    derived = {
        f"{pg.meta.namespace}/{pg.name}"
        for pg in podgroups
        if api_podgroup.TOP_OWNER_METADATA_ANNOTATION in pg.meta.annotations
    }
    # a workload with no queue label went to the default queue: only there can the label be missing
    defaulted = {
        f"{pg.meta.namespace}/{pg.name}"
        for pg in podgroups
        if pg.queue == grouper_config.default_queue and f"{pg.meta.namespace}/{pg.name}" in derived
    }
    pod_owners: dict[str, model.ObjectKey] = {}
    missing_label: set[str] = set()  # PodGroups (namespace/name) a pod of which says the label is missing
    for namespace, podgroup, names in pods:
        group = f"{namespace}/{podgroup}"
        if not owners and group not in defaulted:
            continue  # neither an owner nor a missing label to find among its pods
        for name in names:
            if not owners and group in missing_label:
                break
            raw = state.lookup(namespace, "v1", "Pod", name)
            if raw is None:
                continue
            chain = top_owner.owner_chain(pod=raw, lookup=state.lookup)
            if isinstance(chain, grouper_model.GroupingError):
                continue
            if owners:
                pod_owners[f"{namespace}/{name}"] = _key(chain.top_owner, namespace)
            if (
                podgroup is not None
                and group in defaulted
                and group not in missing_label
                and queues.missing_label_hint(base=chain.top_owner, pod=raw, config=grouper_config) is not None
            ):
                missing_label.add(group)
    workloads: dict[str, model.WorkloadFacts] = {}
    for pg in podgroups:
        key = f"{pg.meta.namespace}/{pg.name}"
        workloads[key] = model.WorkloadFacts(
            owner=_owner(pg) if key in derived else None,
            podgroup_is_input=key not in derived,
            queue_label_missing=key in missing_label,
            preemptibility_set=pg.preemptibility is not None,
        )
    classes = {
        name: model.PriorityClassFacts(name=name, value=pc.value, preempts=pc.preemption_policy != "Never")
        for name, pc in state.priority_class_objects().items()
    }

    def objects(key: model.ObjectKey) -> Mapping[str, Any] | None:
        return state.lookup(key.namespace, key.api_version, key.kind, key.name)

    def find_owner(pod: str) -> model.ObjectKey | None:
        namespace, name = pod.split("/", 1)
        raw = state.lookup(namespace, "v1", "Pod", name)
        if raw is None:
            return None
        chain = top_owner.owner_chain(pod=raw, lookup=state.lookup)
        return None if isinstance(chain, grouper_model.GroupingError) else _key(chain.top_owner, namespace)

    return model.Facts(
        workloads=workloads,
        pod_owners=pod_owners,
        priority_classes=classes,
        objects=objects,
        queue_label_key=config.queue_label_key,
        default_queue=DEFAULT_QUEUE,
        pod_end=pod_end,
        find_owner=find_owner if lazy_owners else model.no_owner_lookup,
    )


def cycle_explanations(
    state: ClusterState,
    config: SchedulerConfig,
    snapshot: Snapshot,
    session: Session,
    *,
    pod_end: model.PodEnd = model.no_known_end,
    lazy_owners: bool = False,
    fixes: FixMemory | None = None,
    seek_fixes: bool = True,
) -> dict[str, model.Explanation]:
    """Explanations of the PodGroups that wait after a cycle (by namespace/name), for its conditions:
    every one's reasons, and first fixes while the cycle's dry runs last (`engine.explain_cycle`; a
    cycle at rest has `engine.rest_dry_runs`, which on a cluster of fewer than `engine.REST_DRY_RUN_PODS`
    pods covers waiting groups by the thousand, twins sharing theirs). `fixes`: what the adapter's
    cycles at rest found, used and kept by its cycles at rest only, so that a run of them (kai sim
    waiting for its next timed event) does not search again what stands. `seek_fixes=False`: reasons
    only (a simulation run forward for an estimate, whose words nobody reads). `pod_end`,
    `lazy_owners`: see `facts`."""
    waiting = engine.waiting_jobs(session)
    if not waiting:
        return {}
    at_rest = dryruns.at_rest(session)
    dry_runs = engine.rest_dry_runs(snapshot) if at_rest else engine.cycle_dry_runs(snapshot)
    if not seek_fixes:
        dry_runs = 0
    ctx = cycle_context(
        state, config, snapshot, session, waiting, owners=dry_runs > 0, pod_end=pod_end, lazy_owners=lazy_owners
    )
    memory = fixes if at_rest else None
    found = engine.explain_cycle(ctx, waiting, dry_runs=dry_runs, known=memory.known() if memory else None)
    if memory is not None:
        memory.remember(found)
    return found.explanations


def cycle_context(
    state: ClusterState,
    config: SchedulerConfig,
    snapshot: Snapshot,
    session: Session,
    chosen: Sequence[Job],
    *,
    owners: bool = True,
    pod_end: model.PodEnd = model.no_known_end,
    lazy_owners: bool = False,
) -> analysis.Context:
    """What `engine.explain_cycle` reads for the chosen jobs: the facts of their pods only (a cycle's
    cost does not grow with the pods that do not wait); `owners=False` for a cycle that runs no dry
    run, where no fix is searched and so no patch made (see `facts`). Reads the cluster state: an
    adapter whose state changes under it calls this where it is not changing (kai run: on its event
    loop)."""
    tasks = snapshot.tasks
    pods = [(job.namespace, job.name, [tasks[t].name for t in job.tasks]) for job in chosen]
    found = facts(state, config, pods, owners=owners, pod_end=pod_end, lazy_owners=lazy_owners and owners)
    return engine.context(snapshot=snapshot, config=config, session=session, facts=found, thorough=False)


class FixMemory(msgspec.Struct):
    """How far cycles have searched for each waiting PodGroup's first fix (`suggest.Search`: the fix,
    or that none works within its dry runs, or how many candidates failed so far).

    A search stands while the group's reasons are the same, tokens and words, and the cluster's
    settings its dry runs ran on are (`engine.basis`: nodes, queues' settings, priority classes): the
    words carry the numbers they rest on (what is free, what the queue holds, the limit), so a change
    of the cluster that bears on them is a new search, and so is a node added or another queue's limit
    raised, while work coming and going elsewhere (a pod of another queue ending) does not take the fix
    off every waiting group's condition only to put it back a dry run at a time. A search for a job
    whose reasons end with the clock (a preemption delay) is not kept.
    """

    searches: dict[str, suggest.Search] = msgspec.field(default_factory=dict)

    def known(self) -> Mapping[str, suggest.Search]:
        """The searches made so far, by PodGroup namespace/name (each for the reasons it names)."""
        return self.searches

    def remember(self, explained: engine.CycleExplanations) -> None:
        """Keep how far a cycle took its searches, for the groups still waiting."""
        for key, search in explained.searches.items():
            if not timed(explained.explanations[key]):
                self.searches[key] = search
        for key in [k for k in self.searches if k not in explained.explanations]:
            del self.searches[key]


def timed(explanation: model.Explanation) -> bool:
    """Whether an explanation holds a reason that ends with the clock rather than with a change."""
    return any(r.token == model.PREEMPTION_DELAY_NOT_ELAPSED for r in explanation.reasons)


class CycleExplainer(msgspec.Struct):
    """What an adapter's cycles say of the waiting jobs when they repeat on a cluster that may not
    have changed (kai run), and what that costs:

    * a `busy` cycle (it bound or evicted pods: a backlog being worked through) gives reasons
      without new fixes: the cluster it explains is gone by the next cycle, and dry cycles would
      multiply the cost of every cycle of the backlog;
    * a cycle at rest spends `dry_runs` dry cycles (one at least, however large the cluster) on the
      jobs in line whose fix is not yet known, and `fixes` keeps what they found while each job's
      reasons stay the same: on a cluster at rest every waiting job comes to carry its fix, a few
      more each cycle;
    * a cycle on the same version as the last one, with the same jobs waiting, keeps the last
      explanations (the same objects give the same reasons) and only explains the jobs whose fix is
      still unknown. A reason that ends with the clock (a preemption delay) is worked out again every
      cycle.
    """

    fixes: FixMemory = msgspec.field(default_factory=FixMemory)
    last: tuple[object, tuple[str, ...], engine.CycleExplanations] | None = None

    def plan(
        self, version: object, waiting: Sequence[Job], *, busy: bool
    ) -> tuple[dict[str, model.Explanation] | None, Sequence[Job]]:
        """(The last explanations if they stand for this cycle, else None; the jobs to explain.)"""
        if not waiting:
            self.last = None
            return {}, ()
        last = self.last
        if last is None or last[:2] != (version, tuple(j.key for j in waiting)):
            return None, waiting
        if any(timed(e) for e in last[2].explanations.values()):
            return None, waiting
        if busy or not last[2].unsought:
            return last[2].explanations, ()
        unsought = set(last[2].unsought)
        return None, [job for job in waiting if job.key in unsought]

    @staticmethod
    def dry_runs(snapshot: Snapshot, *, busy: bool) -> int:
        """The dry cycles a cycle may spend on fixes: none when busy, else the engine's budget and one
        at least (a dry cycle costs about one cycle)."""
        return 0 if busy else max(1, engine.cycle_dry_runs(snapshot))

    def record(
        self, version: object, waiting: Sequence[Job], chosen: Sequence[Job], found: engine.CycleExplanations
    ) -> dict[str, model.Explanation]:
        """Keep what the cycle found (`engine.explain_cycle` of the jobs `plan` chose); its explanations
        of every waiting job."""
        keys = tuple(j.key for j in waiting)
        last = self.last
        if last is not None and last[:2] == (version, keys) and len(chosen) < len(waiting):
            # only the jobs whose fix was unknown were explained again: the others' words stand
            explanations = {**last[2].explanations, **found.explanations}
            found = engine.CycleExplanations(
                explanations=explanations, searches=found.searches, unsought=found.unsought
            )
        self.fixes.remember(found)
        self.last = (version, keys, found)
        return found.explanations


def pending_reasons(
    waiting: Sequence[Job], result: CycleResult, explanations: Mapping[str, model.Explanation]
) -> dict[str, tuple[str, str]]:
    """Each PodGroup waiting after a cycle (`engine.waiting_jobs`): its queue and the reason its
    condition gives, by namespace/name: the explanation's dominant reason (every waiting group is
    explained); else, for a group with no reason to give, the cycle's own reason (KAI's token); else
    `Unschedulable`."""
    own = {c.podgroup: c.reason for c in result.conditions}
    out: dict[str, tuple[str, str]] = {}
    for job in waiting:
        explained = explanations.get(job.key)
        dominant = explained.reason if explained is not None else None
        reason = dominant.token if dominant is not None else own.get(job.key, UNSCHEDULABLE)
        out[job.key] = (job.queue_name, reason)
    return out


def _owner(pg: api_podgroup.PodGroup) -> model.ObjectKey | None:
    """The top owner the pod grouper recorded on a PodGroup it made."""
    fields = api_podgroup.top_owner_fields(pg)
    if not fields.get("kind") or not fields.get("name"):
        return None
    group, version = fields.get("group", ""), fields.get("version", "")
    api_version = f"{group}/{version}" if group else version
    return model.ObjectKey(
        api_version=api_version, kind=fields["kind"], namespace=pg.meta.namespace, name=fields["name"]
    )


def live_estimates(explanations: Sequence[model.Explanation]) -> dict[str, model.Estimate]:
    """On a live cluster there are no durations to simulate with: no time, the condition that starts it
    (an `Estimator`); for a job that waits until something changes, its first fix (or that none was
    found)."""
    out: dict[str, model.Estimate] = {}
    for expl in explanations:
        dominant = expl.reason
        if dominant is None or dominant.never or dominant.token not in STARTS_WHEN:
            text = model.NEVER_STARTS
            if expl.suggestions:
                text += f", such as its fix ({expl.suggestions[0].change})"
            elif expl.phase == model.PENDING:
                text += f"; {model.NO_FIX}"
            out[expl.key] = model.Estimate(start=None, text=text)
        else:
            text = f"no time on a live cluster; it starts {STARTS_WHEN[dominant.token]}"
            out[expl.key] = model.Estimate(start=None, text=text)
    return out


def podgroup_key(snapshot: Snapshot, key: str) -> str:
    """A PodGroup's namespace/name, also found by the name of its workload (`build-pod`)."""
    namespace, name = key.split("/", 1)
    if any(j.key == key for j in snapshot.jobs):
        return key
    matches = sorted(j.key for j in snapshot.jobs if j.namespace == namespace and j.display_name == name)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise NotFound(f"{key} names several workloads' PodGroups: {', '.join(matches)}")
    raise NotFound(f"podgroup {key} does not exist")


def _estimated(expl: model.Explanation, estimate: Estimator) -> model.Explanation:
    if expl.phase not in (model.PENDING, model.PIPELINED) or not expl.reasons:
        return expl
    return _with_estimate(expl, estimate([expl])[expl.key])


def _with_estimate(expl: model.Explanation, found: model.Estimate) -> model.Explanation:
    return msgspec.structs.replace(
        expl, estimated_start=found.start, estimate=found.text, estimate_after_fix=found.after_fix
    )


def podgroup_document(ctx: analysis.Context, key: str, estimate: Estimator) -> dict[str, Any]:
    """`kai explain podgroup`: the contract's document for one PodGroup (namespace/name)."""
    job = next((j for j in ctx.snapshot.jobs if j.key == key), None)
    if job is None:
        raise NotFound(f"podgroup {key} does not exist")
    return render.podgroup_document(_estimated(engine.explain_job(ctx, job, budget=engine.DRY_RUNS_PER_JOB), estimate))


def queue_document(
    ctx: analysis.Context, name: str, estimate: Estimator, *, known: Mapping[str, model.Explanation] | None = None
) -> dict[str, Any]:
    """`kai explain queue`: the queue, and its waiting jobs explained with their estimated starts (only
    those: `engine.explain_listed`, with the fixes the cycle found, `known`, where the view's dry runs
    do not reach)."""
    if name not in ctx.snapshot.queue_by_name:
        raise NotFound(f"queue {name} does not exist")
    shown = queue_views.waiting_in(ctx, name)
    explanations = engine.explain_listed(ctx, shown, dry_runs=engine.view_dry_runs(ctx.snapshot), known=known)
    waiting = [k for k, e in explanations.items() if e.phase in (model.PENDING, model.PIPELINED) and e.reasons]
    estimates = estimate([explanations[key] for key in waiting])
    for key in waiting:
        explanations[key] = _with_estimate(explanations[key], estimates[key])
    return queue_views.queue_document(ctx, name, explanations)
