"""The consolidation action: move running pods to make room for a pending job the free space can't fit.

When the free GPUs add up to what a pending preemptible job needs but are scattered across nodes,
preemptible pods are moved: each victim is evicted and re-placed (Pipelined) on another node, and
the pending job is placed onto the room they leave. A scenario is accepted only if every victim
is re-placed; at most `maxConsolidationPreemptees` pods are moved for one job. Consolidation is
off when the GPU or CPU placement strategy is spread (spreading is the opposite goal).

A job whose PodGroup says `safeToConsolidate: false` (bare pods, jobs that treat a deleted pod as a
failure) is never moved; it can still be preempted or reclaimed, and it can still ask for room.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kai.actions.common import preemptors
from kai.actions.common.solver import Scenario, solve
from kai.actions.common.victims import VictimPool, amount, main_resource
from kai.core.model import Job, Task
from kai.core.resources import GPU
from kai.core.session import Session
from kai.core.statement import Statement

EPS = 1e-9
SPREAD = "spread"


def free_gpus(session: Session) -> float:
    """GPUs the cluster could give a job without evicting anyone for good: idle and releasing whole
    GPUs plus the free room on shared devices (KAI's enough-allocatable-GPUs check)."""
    whole = np.maximum(session.idle[:, GPU], 0.0).sum() + np.maximum(session.releasing[:, GPU], 0.0).sum()
    shared = sum(
        max(0.0, dev.room_now())
        for devices in session.devices.values()
        for dev in devices.values()
        if not dev.all_releasing
    )
    return float(whole) + shared


class ConsolidationAction:
    name = "consolidation"

    def execute(self, session: Session) -> None:
        config = session.config
        if config.gpu_placement == SPREAD or config.cpu_placement == SPREAD:
            return
        jobs = preemptors.pending_jobs(session, preemptible_only=True)
        # jobs that are not safe to move never enter the victim order (KAI's consolidation victim filter)
        pool = VictimPool(session, admit=lambda job: job.safe_to_consolidate)
        if not pool.by_queue:
            return

        def attempt(job: Job, tasks: Sequence[Task]) -> bool:
            need = float(sum(t.request[GPU] + t.gpu_portion * max(1, t.gpu_devices) for t in tasks))
            if need <= EPS or free_gpus(session) < need - EPS:
                return False
            request = session.job_request(list(tasks))
            if any(check(session, job, request) is not None for check in session.capacity_checks):
                return False
            r = main_resource(request)

            def message(scenario: Scenario, task: int) -> str:
                node = session.snapshot.nodes.names[scenario.moved.get(task, -1)] if task in scenario.moved else "?"
                return (
                    f"evicted by consolidation: moved to {node} to make room for {job.display_name}, which needs "
                    f"{amount(r, float(request[r]))} that free space scattered across nodes could not hold"
                )

            stmt = Statement(session, action=self.name)
            found = solve(
                session,
                stmt,
                preemptor=job,
                tasks=tasks,
                units=pool.units(pool.queues, exclude=job.index),
                validate=lambda scenario: not scenario.lost,
                message=message,
                max_victim_tasks=config.max_consolidation_preemptees,
            )
            if found is None:
                return False
            stmt.commit()
            return True

        preemptors.run(session, action=self.name, jobs=jobs, attempt=attempt)
