"""When a waiting workload would start: simulate forward on a copy of the simulated cluster.

The copy (`Simulation.fork`) runs the same core cycle after cycle with no new arrivals: pods run
for their `sim.kai.scheduler/duration`, evicted pods terminate over their grace period, and the
first cycle in which a workload's gang is bound is its estimated start. The events of that cycle
(pods that finished or were deleted) are what start it. A fork that goes idle first leaves the
workload waiting either on pods that never end (no duration) or until something changes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from kai.api.fields import format_timestamp
from kai.api.podgroup import format_duration
from kai.core.model import TaskStatus
from kai.explain import analysis, model, words
from kai.sim.engine import EventRecord, Simulation

FINISHED = {"Completed": ("finishes", "finish"), "Killing": ("terminates", "terminate")}  # one pod, several


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    start: float | None  # virtual time of the cycle that starts it; None when there is none
    text: str  # how the estimate was made, or why there is none


def estimate_starts(sim: Simulation, podgroups: Collection[str], *, horizon: float) -> dict[str, Estimate]:
    """Estimated starts of the given PodGroups (namespace/name) within `horizon` seconds from now."""
    if not podgroups:
        return {}
    fork = sim.fork()
    begin = fork.now
    remaining = set(podgroups)
    names = _workload_names(sim)
    out: dict[str, Estimate] = {}
    seen = len(fork.totals.events)
    for _ in fork.cycles(cycles=None, until_idle=True, until=begin + horizon):
        assert fork.last_cycle is not None
        snapshot, session = fork.last_cycle
        at = snapshot.now
        fresh = fork.totals.events[seen:]
        seen = len(fork.totals.events)
        for job in snapshot.jobs:
            if job.key in remaining and analysis.phase(session, job) == model.RUNNING:
                remaining.discard(job.key)
                out[job.key] = Estimate(start=at, text=_starts_text(at, begin, fresh, names))
        if not remaining:
            break
    for key in sorted(remaining):
        out[key] = Estimate(start=None, text=_no_start_text(fork, begin, horizon, names))
    return out


def _workload_names(sim: Simulation) -> dict[str, str]:
    """Pod namespace/name -> the name of its workload, for the pods the cluster has now."""
    if sim.last_cycle is None:
        return {}
    snapshot, _ = sim.last_cycle
    return {t.key: snapshot.jobs[t.job].display_name for t in snapshot.tasks}


def _starts_text(at: float, begin: float, events: list[EventRecord], names: dict[str, str]) -> str:
    when = f"starts at {format_timestamp(at)} (in {format_duration(max(0.0, at - begin))})"
    done: dict[str, list[str]] = {}
    for event in events:
        if event.reason not in FINISHED or not event.object.startswith("Pod/") or event.type != "Normal":
            continue
        if event.reason == "Killing" and "grace period" not in event.message:
            continue  # the eviction itself; the pod is gone only when its grace period ends
        pod = event.object.removeprefix("Pod/")
        done.setdefault(event.reason, []).append(names.get(pod, pod.split("/", 1)[1]))
    if not done:
        return when
    parts = []
    for reason, who in sorted(done.items()):
        unique = sorted(set(who))
        parts.append(f"{words.listing(unique)} {FINISHED[reason][0 if len(unique) == 1 else 1]}")
    return f"{when}, once {' and '.join(parts)}"


def _no_start_text(fork: Simulation, begin: float, horizon: float, names: dict[str, str]) -> str:
    if fork.now > begin + horizon:
        return f"not within --max-time ({format_duration(horizon)})"
    endless = sorted(
        {
            names.get(key) or (p.owner[1] if p.owner else p.pod.name)
            for key, p in fork.pods.items()
            if p.ours and p.status == TaskStatus.RUNNING and p.finish_at is None
        }
    )
    if endless:
        return f"unknown: waits on jobs with no duration ({words.listing(endless)})"
    return "none: it does not start unless something changes"
