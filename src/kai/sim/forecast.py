"""When a waiting workload would start: simulate forward on a copy of the simulated cluster.

The copy (`Simulation.fork`) runs the same core cycle after cycle with no new arrivals: pods run
for their `sim.kai.scheduler/duration`, evicted pods terminate over their grace period, and the
first cycle in which a workload's gang is bound is its estimated start. The events of that cycle
(pods that finished or were deleted) are what start it. A fork that goes idle first leaves the
workload waiting either on pods that never end (no duration) or until something changes.

A workload that does not start as things are gets the start it would have once its first verified
fix is made now: another fork, with the fix's merge patches applied (`kai.sim.patching`), simulated
forward the same way. Each such workload costs one more fork, so a view that estimates many of them
(`kai explain queue`) simulates the first few in line (`after_fix_forks`: fewer on a larger cluster)
and says so of the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kai.api.fields import format_timestamp
from kai.api.podgroup import format_duration
from kai.core.model import TaskStatus
from kai.explain import analysis, model, words
from kai.sim import patching
from kai.sim.engine import EventRecord, Simulation

FINISHED = {"Completed": ("finishes", "finish"), "Killing": ("terminates", "terminate")}  # one pod, several


AFTER_FIX_FORKS = 8  # forks one estimate call may spend on starts after a fix, at most
AFTER_FIX_PODS = 20_000  # and about this many pods simulated forward in all (at least one fork)


def estimate_starts(
    sim: Simulation, explanations: Sequence[model.Explanation], *, horizon: float
) -> dict[str, model.Estimate]:
    """Estimated starts of the given waiting PodGroups within `horizon` seconds from now; for one that
    does not start as things are, the start once its first fix is made now (if it has one)."""
    if not explanations:
        return {}
    names = _workload_names(sim)
    plain = _forward(sim.fork(), {e.key for e in explanations}, horizon=horizon, names=names)
    out: dict[str, model.Estimate] = {}
    allowed = forks = after_fix_forks(sim)
    for expl in explanations:
        found = plain[expl.key]
        if found.start is not None:
            out[expl.key] = found
        elif not expl.suggestions:
            out[expl.key] = model.Estimate(start=None, text=f"{found.text}; {model.NO_FIX}")
        elif forks <= 0:
            fix = expl.suggestions[0].change
            text = f"{found.text}; its start after its fix ({fix}) was not simulated (more than {allowed} here)"
            out[expl.key] = model.Estimate(start=None, text=text)
        else:
            forks -= 1
            out[expl.key] = _after_fix(sim, expl, found, horizon=horizon, names=names)
    return out


def after_fix_forks(sim: Simulation) -> int:
    """How many starts after a fix one estimate call simulates: `AFTER_FIX_FORKS`, fewer as the cluster
    grows (each is a fork simulated forward), never none."""
    return max(1, min(AFTER_FIX_FORKS, AFTER_FIX_PODS // max(1, len(sim.pods))))


def _after_fix(
    sim: Simulation, expl: model.Explanation, plain: model.Estimate, *, horizon: float, names: dict[str, str]
) -> model.Estimate:
    """The start once the first fix is made now (on a fork), and what happens without it."""
    fix = expl.suggestions[0]
    fork = sim.fork()
    without = f"without it, {plain.text.removeprefix('none: ')}"
    if not patching.apply_patches(fork, fix.patches):
        return model.Estimate(start=None, text=f"{plain.text}; its fix ({fix.change}) could not be simulated")
    found = _forward(fork, {expl.key}, horizon=horizon, names=names)[expl.key]
    if found.start is None:
        text = f"{found.text.removeprefix('none: ')} even after its fix ({fix.change}); {without}"
        return model.Estimate(start=None, text=text, after_fix=fix.change)
    when, _, events = found.text.partition(", once ")
    text = f"{when} after its fix ({fix.change}){', once ' + events if events else ''}; {without}"
    return model.Estimate(start=found.start, text=text, after_fix=fix.change)


def start_after_patches(
    sim: Simulation, patches: Sequence[model.Patch], started: Callable[[Simulation], bool], *, horizon: float
) -> model.Estimate | None:
    """When `started` first holds on a fork with the patches applied now, within `horizon` seconds
    (a start of None and why not otherwise); None when the patches cannot be applied."""
    fork = sim.fork()
    if not patching.apply_patches(fork, patches):
        return None
    names = _workload_names(sim)
    begin = fork.now
    seen = len(fork.totals.events)
    for _ in fork.cycles(cycles=None, until_idle=True, until=begin + horizon):
        assert fork.last_cycle is not None
        if started(fork):
            at = fork.last_cycle[0].now
            return model.Estimate(start=at, text=_starts_text(at, begin, fork.totals.events[seen:], names))
        seen = len(fork.totals.events)
    return model.Estimate(start=None, text=_no_start_text(fork, begin, horizon, names))


def _forward(fork: Simulation, keys: set[str], *, horizon: float, names: dict[str, str]) -> dict[str, model.Estimate]:
    """Run the fork on until each of the PodGroups runs, it goes idle, or `horizon` seconds have passed."""
    begin = fork.now
    remaining = set(keys)
    out: dict[str, model.Estimate] = {}
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
                out[job.key] = model.Estimate(start=at, text=_starts_text(at, begin, fresh, names))
        if not remaining:
            break
    for key in sorted(remaining):
        out[key] = model.Estimate(start=None, text=_no_start_text(fork, begin, horizon, names))
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
    return model.NEVER_STARTS
