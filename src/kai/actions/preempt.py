"""The preempt action: a pending job takes resources from lower-priority jobs of its own queue.

Victims are preemptible jobs of the same queue with strictly lower priority and running pods,
lowest priority first, then the newest; equal priority never preempts. Recently started jobs are
protected by the queue's `preemptMinRuntime` (their surplus pods excepted). The preemptor must
pass the queue's capacity gates once the victims are gone: its limits, and its quota if it is
not preemptible. The preemptor lands Pipelined on the resources being released and binds once
the victims are gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai.actions.common import preemptors
from kai.actions.common.bounds import could_free_enough
from kai.actions.common.solver import Scenario, solve
from kai.actions.common.victim_steps import VictimSteps
from kai.actions.common.victims import VictimPool, amount, main_resource, protected_by_guards
from kai.core.model import Job, Task
from kai.core.session import Session
from kai.core.statement import Statement


class PreemptAction:
    name = "preempt"

    def execute(self, session: Session) -> None:
        pool = VictimPool(session)
        steps = VictimSteps(pool)

        def attempt(job: Job, tasks: Sequence[Task]) -> bool:
            entries = pool.by_queue.get(job.queue, [])
            if not entries or entries[0][1].priority >= job.priority:
                return False
            if not could_free_enough(session, tasks, [job.queue]):
                return False
            request = session.job_request(list(tasks))
            r = main_resource(request)
            queue = session.snapshot.queues[job.queue].name

            def message(scenario: Scenario, task: int) -> str:
                victim = session.snapshot.jobs[session.task(task).job]
                why = (
                    f"{job.display_name} (priority {job.priority}) needs {amount(r, float(request[r]))} "
                    f"in queue {queue}; "
                    f"{victim.display_name} has lower priority {victim.priority}"
                )
                if task in scenario.moved:
                    node = session.snapshot.nodes.names[scenario.moved[task]]
                    return f"evicted by preempt: moved to {node} to make room: {why}"
                return f"evicted by preempt: {why}"

            stmt = Statement(session, action=self.name)
            found = solve(
                session,
                stmt,
                preemptor=job,
                tasks=tasks,
                units=steps.ordered([job.queue], below_priority=job.priority)
                or pool.units(
                    [job.queue],
                    below_priority=job.priority,
                    is_protected=lambda victim: protected_by_guards(session, self.name, job, victim),
                ),
                validate=lambda scenario: True,
                message=message,
            )
            if found is None:
                return False
            stmt.commit()
            return True

        preemptors.run(session, action=self.name, jobs=preemptors.pending_jobs(session), attempt=attempt)
