"""Every waiting PodGroup's condition says why in `kai explain`'s words, however many wait, and a
cluster at rest comes to give each its first verified fix: the dry runs that verify fixes are
spread over the cycles at rest (`kai.cluster.explaining.CycleExplainer`, what `kai run` does), the
groups not yet looked at first, and what they found is kept while each group's reasons stay the
same."""

from __future__ import annotations

import json
import pathlib

from kai.cli.simulate import simulate
from kai.cluster import explaining
from kai.core.model import Job
from kai.explain import engine, model
from kai.sim.engine import Simulation
from tests.explain.explain_check import kai

REST = pathlib.Path(__file__).parent / "rest"


def too_large(tmp_path: pathlib.Path, count: int) -> pathlib.Path:
    path = tmp_path / "many.yaml"
    path.write_text(
        "---\n".join(
            f"""apiVersion: v1
kind: Pod
metadata: {{name: big-{i:02d}, labels: {{kai.scheduler/queue: default-queue}}}}
spec:
  schedulerName: kai-scheduler
  containers:
  - {{name: main, image: ubuntu, resources: {{limits: {{nvidia.com/gpu: "12"}}}}}}
"""
            for i in range(count)
        )
    )
    return path


def test_every_waiting_group_gets_explains_words_and_its_fix_in_kai_sim(tmp_path: pathlib.Path) -> None:
    """Twenty pods larger than any node of the embedded cluster: more than a cycle used to explain."""
    out = json.loads(kai(["sim", "-f", str(too_large(tmp_path, 20)), "-o", "json"]))
    groups = {g["name"]: g for g in out["podGroups"]}
    pods = {p["name"]: p for p in out["pods"]}
    assert len(groups) == len(pods) == 20
    for i in range(20):
        pod = pods[f"big-{i:02d}"]
        [condition] = groups[pod["podGroup"]]["conditions"]
        expected = f"pod big-{i:02d} asks 12 GPUs; the largest node has 8 GPUs; to run it: reduce to 8 GPUs per pod"
        assert (condition["reasons"][0]["reason"], condition["message"]) == ("PodTooLarge", expected)
        assert (pod["reason"], pod["message"]) == ("Unschedulable", expected)


def explain(sim: Simulation, explainer: explaining.CycleExplainer, version: int) -> dict[str, model.Explanation]:
    """One kai run cycle at rest's explaining, with one dry run (a cluster of more than
    `engine.CYCLE_DRY_RUN_PODS` pods gets that many)."""
    assert sim.last_cycle is not None
    snapshot, session = sim.last_cycle
    waiting = engine.waiting_jobs(session)
    standing, chosen = explainer.plan(version, waiting, busy=False)
    if standing is not None:
        return standing
    ctx = explaining.cycle_context(sim, sim.config, snapshot, session, chosen)
    found = engine.explain_cycle(ctx, chosen, dry_runs=1, known=explainer.fixes.known())
    return explainer.record(version, waiting, chosen, found)


def by_workload(explanations: dict[str, model.Explanation]) -> dict[str, str]:
    return {e.workload: e.message for e in explanations.values()}


def test_cycles_at_rest_give_every_waiting_group_its_fix_one_dry_run_at_a_time(tmp_path: pathlib.Path) -> None:
    sim = simulate(
        paths=(str(REST / "three-wait.yaml"),),
        cycles=1,
        until_idle=False,
        max_time="24h",
        actions_text=None,
        config_path=None,
        start_time=None,
    )
    explainer = explaining.CycleExplainer()
    lost = (
        'queue "zzz" does not exist; create it or set the kai.scheduler/queue label to one of: '
        "a, b, c, default-queue, team"
    )

    # the first cycle: every group says why; the one dry run gives the first in line its fix
    said = by_workload(explain(sim, explainer, version=1))
    fixed = "pod big-{} asks 12 GPUs; the largest node has 8 GPUs; to run it: reduce to 8 GPUs per pod"
    reason_only = "pod big-{} asks 12 GPUs; the largest node has 8 GPUs"
    assert said == {"Pod/big-0": fixed.format(0), "Pod/big-1": reason_only.format(1), "Pod/lost": lost}

    # the next cycle on the same cluster looks at the next group; the first keeps its fix
    said = by_workload(explain(sim, explainer, version=1))
    assert said == {"Pod/big-0": fixed.format(0), "Pod/big-1": fixed.format(1), "Pod/lost": lost}
    assert explainer.last is not None and explainer.last[2].unsought == ("default/" + lost_group(sim),)

    # lost's three candidate queues fail one dry run a cycle; then nothing is left to look at
    for _ in range(3):
        assert explainer.plan(1, waiting(sim), busy=False)[0] is None
        said = by_workload(explain(sim, explainer, version=1))
    assert said["Pod/lost"] == lost
    search = explainer.fixes.known()["default/" + lost_group(sim)]
    assert (search.done, search.tried, search.found) == (True, 3, None)
    standing, chosen = explainer.plan(1, waiting(sim), busy=False)
    assert standing is not None and by_workload(standing) == said and not chosen

    # the cluster changed elsewhere: the groups' reasons are the same words, their searches stand
    said = by_workload(explain(sim, explainer, version=2))
    assert said == {"Pod/big-0": fixed.format(0), "Pod/big-1": fixed.format(1), "Pod/lost": lost}

    # the node grew to 10 GPUs: the big pods' reasons changed, what was found for the old ones does
    # not count and their search starts over, the first in line first; lost's reason is the same
    grown = tmp_path / "grown.yaml"
    grown.write_text((REST / "three-wait.yaml").read_text().replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "10"'))
    sim = simulate(
        paths=(str(grown),),
        cycles=1,
        until_idle=False,
        max_time="24h",
        actions_text=None,
        config_path=None,
        start_time=None,
    )
    said = by_workload(explain(sim, explainer, version=3))
    assert said == {
        "Pod/big-0": "pod big-0 asks 12 GPUs; the largest node has 10 GPUs; to run it: reduce to 10 GPUs per pod",
        "Pod/big-1": "pod big-1 asks 12 GPUs; the largest node has 10 GPUs",
        "Pod/lost": lost,
    }


def waiting(sim: Simulation) -> list[Job]:
    assert sim.last_cycle is not None
    return engine.waiting_jobs(sim.last_cycle[1])


def lost_group(sim: Simulation) -> str:
    assert sim.last_cycle is not None
    [job] = [j for j in sim.last_cycle[0].jobs if j.display_name == "lost"]
    return job.name
