"""The reclaim action: a queue below its fair share takes resources back from queues above theirs.

The reclaimer must pass the session's reclaim gates (its queue stays within its fair share with
the job, and within quota if the job is not preemptible). Victims are preemptible jobs with
running pods in other queues that the reclaim victim filters let through (queues some strategy
could take from), in KAI's victim order (`kai.actions.common.victims`); recently started jobs are
protected by `reclaimMinRuntime`. Each scenario is judged by the reclaim validators (KAI's
strategies and saturation check, see `kai.plugins.proportion.reclaimable`); victims that are only
moved elsewhere do not count as reclaimed.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai.actions.common import preemptors
from kai.actions.common.bounds import could_free_enough
from kai.actions.common.solver import Scenario, solve
from kai.actions.common.victim_steps import VictimSteps
from kai.actions.common.victims import VictimPool, amount, main_resource, protected_by_guards
from kai.core.model import Job, Task
from kai.core.queue_tree import leveled_queues
from kai.core.resources import Vector
from kai.core.session import ReclaimScenario, Session
from kai.core.statement import Statement

EPS = 1e-9


def _n(resource: int, value: float) -> str:
    """Just the number of an amount, in the unit the message already named."""
    return amount(resource, value).split()[0]


class ReclaimAction:
    name = "reclaim"

    def execute(self, session: Session) -> None:
        pool = VictimPool(session)
        steps = VictimSteps(pool)
        parents = tuple(q.parent for q in session.snapshot.queues)

        def attempt(job: Job, tasks: Sequence[Task]) -> bool:
            request = session.job_request(list(tasks))
            if not all(gate(session, job, request) for gate in session.reclaim_gates):
                return False
            queues = session.snapshot.queues
            # only queues some strategy could take from hold victims (KAI's reclaim victim filter)
            victim_queues = [
                q
                for q in pool.queues
                if q != job.queue and all(f(session, job, request, q) for f in session.reclaim_victim_filters)
            ]
            if not victim_queues:
                return False
            # victims may be lost only from queues some strategy still allows; if those cannot free
            # enough, no scenario can be valid (moved victims free nothing)
            losing = [q for q in victim_queues if all(c(session, job, request, q) for c in session.reclaim_loss_checks)]
            if not could_free_enough(session, tasks, losing):
                return False
            base_alloc = session.queue_allocated.copy()
            base_alloc_np = session.queue_allocated_np.copy()
            base_fair = session.fair_share.copy()
            r = main_resource(request)

            def validate(scenario: Scenario) -> bool:
                taken: dict[int, list[Vector]] = {}
                for unit in scenario.lost:
                    victim = session.snapshot.jobs[unit.job]
                    charge = session.job_request([session.task(t) for t in unit.tasks])
                    taken.setdefault(victim.queue, []).append(charge)
                check = ReclaimScenario(
                    reclaimer=job, request=request, victims=taken, allocated=base_alloc, allocated_np=base_alloc_np
                )
                return all(v(session, check) is None for v in session.reclaim_validators)

            texts: dict[int, str] = {}  # why, per victim leaf queue: the same for every victim there

            def why(victim_queue: int) -> str:
                mine, theirs = leveled_queues(parents, job.queue, victim_queue)
                names = queues
                has, fair = float(base_alloc[mine, r]), float(base_fair[mine, r])
                v_has, v_fair = float(base_alloc[theirs, r]), float(base_fair[theirs, r])
                if v_has > v_fair + EPS:
                    over = f"{names[theirs].name} is over its fair share (has {_n(r, v_has)} of {_n(r, v_fair)})"
                else:
                    quota = float(queues[theirs].deserved[r])
                    over = f"{names[theirs].name} is over its quota (has {_n(r, v_has)} of {_n(r, quota)})"
                below = f"queue {names[mine].name} is below its fair share of {amount(r, fair)} (has {_n(r, has)})"
                return f"{below}; {over}"

            def message(scenario: Scenario, task: int) -> str:
                victim_queue = session.snapshot.jobs[session.task(task).job].queue
                text = texts.get(victim_queue)
                if text is None:
                    text = texts[victim_queue] = why(victim_queue)
                if task in scenario.moved:
                    node = session.snapshot.nodes.names[scenario.moved[task]]
                    return f"evicted by reclaim: moved to {node} to make room for {job.display_name}: {text}"
                return f"evicted by reclaim: {text}"

            stmt = Statement(session, action=self.name)
            found = solve(
                session,
                stmt,
                preemptor=job,
                tasks=tasks,
                units=steps.ordered(victim_queues)
                or pool.units(
                    victim_queues, is_protected=lambda victim: protected_by_guards(session, self.name, job, victim)
                ),
                validate=validate,
                message=message,
            )
            if found is None:
                return False
            stmt.commit()
            return True

        preemptors.run(session, action=self.name, jobs=preemptors.pending_jobs(session), attempt=attempt)
