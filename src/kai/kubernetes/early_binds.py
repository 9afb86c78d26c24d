"""Bindings sent while the cycle that decided them is still running.

A cycle over a large backlog spends seconds in allocate (about 3 s of CPU for 20,000 pending pods
on 5,000 nodes), and until it ends no pod would be bound, where kube-scheduler binds its first pod
at once. Allocate commits one job at a time (a statement per attempt: a gang's missing pods, or one
more pod of an elastic job), and a binding it commits is final within the cycle: the later actions
choose victims only among jobs with no pod placed this cycle
(`kai.actions.common.victims.is_candidate`), and stalegangeviction stops only gangs short of their
minimum, which a gang just placed whole is not. So `kai run` reads the session's placements while
the actions run (`kai.scheduler.cycle.run_actions(opened=...)`) and binds what allocate committed
at once. The decisions are the cycle's own, unchanged: they only leave sooner, and the cycle's
effects (PodGroup and Queue status, the rest of its placements) are written at its end as before.

What is bound early is a run of placements of one job, all by allocate, all bindings, none on a
shared GPU (those wait for a device reservation before their binding, `kai.kubernetes.shared_binds`,
and keep the end-of-cycle path with their gang). The run at the end of the list is held back until
a placement of another job follows it, since its statement may still be appending to it; what is
held when the cycle ends goes with the cycle's effects. A job placed in more than one commit (an
elastic job's pods beyond its minimum) is bound, and rolled back if a binding fails, run by run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kai.actions.allocate import AllocateAction
from kai.core.decisions import Kind, Placement
from kai.core.model import Snapshot
from kai.core.session import Session


@dataclass(slots=True)
class EarlyBinds:
    """Follows one cycle's session; `take()` gives the placements that may be bound now."""

    snapshot: Snapshot
    session: Session | None = None  # set from the cycle's thread once the session is open
    bound: set[str] = field(default_factory=set)  # pods whose placements were taken (namespace/name)
    _seen: int = 0  # placements up to here are taken or left for the cycle's end
    _job_of: Mapping[str, int] | None = None  # pod -> job index in the snapshot

    def opened(self, session: Session) -> None:
        self.session = session

    def take(self) -> list[Placement]:
        """The placements committed since the last call that may be bound now (see the module)."""
        if self.session is None:
            return []
        placements = self.session.placements
        end = len(placements)  # only ever grows; each item is complete once appended
        if end <= self._seen:
            return []
        if self._job_of is None:
            self._job_of = {task.key: task.job for task in self.snapshot.tasks}
        job_of = self._job_of
        cut = end
        trailing = job_of.get(placements[end - 1].pod)
        while cut > self._seen and job_of.get(placements[cut - 1].pod) == trailing:
            cut -= 1
        out: list[Placement] = []
        start = self._seen
        while start < cut:
            job = job_of.get(placements[start].pod)
            stop = start + 1
            while stop < cut and job_of.get(placements[stop].pod) == job:
                stop += 1
            run = placements[start:stop]
            if job is not None and all(_early(p) for p in run):
                out.extend(run)
            start = stop
        self._seen = cut
        self.bound.update(p.pod for p in out)
        return out


def _early(placement: Placement) -> bool:
    return placement.action == AllocateAction.name and placement.kind is Kind.BIND and not placement.gpu_groups
