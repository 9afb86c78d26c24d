"""Every waiting PodGroup's condition says why in `kai explain`'s words, however many wait, and a
cluster at rest comes to give each its first verified fix: the dry runs that verify fixes are
spread over the cycles at rest (`kai.cluster.explaining.CycleExplainer`, what `kai run` does), the
groups not yet looked at first, and what they found is kept while each group's reasons and the
cluster's settings stay the same; `kai sim` above 2,000 pods gives them on a cycle at rest."""

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


def large_at_rest(tmp_path: pathlib.Path) -> pathlib.Path:
    """2,040 pods: 2,000 already running on 20 nodes of 8 GPUs, then 30 pods of 12 GPUs in queue team
    and 10 of 10 GPUs in queue other, larger than any node: a cycle that decides nothing."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    resources = {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}
    items: list[dict[str, object]] = [
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "root"},
            "spec": {"resources": resources},
        }
    ]
    items += [
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"parentQueue": "root", "resources": resources},
        }
        for name in ("team", "other")
    ]
    items += [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"node-{n:02d}"},
            "status": {"allocatable": {"cpu": "256", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}},
        }
        for n in range(20)
    ]

    def pod(name: str, queue: str, resources: dict[str, object], node: str | None = None) -> dict[str, object]:
        spec: dict[str, object] = {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "ubuntu", "resources": resources}],
        }
        if node is not None:
            spec["nodeName"] = node
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue}},
            "spec": spec,
        }

    items += [pod(f"web-{i:04d}", "team", {"requests": {"cpu": "100m"}}, f"node-{i % 20:02d}") for i in range(2000)]
    for name, queue, count, gpus in (("big", "team", 30, 12), ("wide", "other", 10, 10)):
        items += [pod(f"{name}-{i:02d}", queue, {"limits": {"nvidia.com/gpu": str(gpus)}}) for i in range(count)]
    path = tmp_path / "large.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_kai_sim_above_two_thousand_pods_gives_every_waiting_group_its_fix_when_at_rest(
    tmp_path: pathlib.Path,
) -> None:
    """Above `engine.CYCLE_DRY_RUN_PODS` pods a busy cycle has no dry run to spare; a cycle at rest has
    more, and the waiting pods alike share one (40 groups of two kinds: two dry runs)."""
    path = large_at_rest(tmp_path)
    out = json.loads(kai(["sim", "-f", str(path), "-o", "json"]))
    pods = {p["name"]: p for p in out["pods"]}
    groups = {g["name"]: g for g in out["podGroups"]}
    assert len(pods) == 2040
    for name, count, gpus in (("big", 30, 12), ("wide", 10, 10)):
        for i in range(count):
            pod = pods[f"{name}-{i:02d}"]
            expected = (
                f"pod {name}-{i:02d} asks {gpus} GPUs; the largest node has 8 GPUs; to run it: reduce to 8 GPUs per pod"
            )
            assert (pod["reason"], pod["message"]) == ("Unschedulable", expected)
            [condition] = groups[pod["podGroup"]]["conditions"]
            assert condition["message"] == expected


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


def rest_sim(path: pathlib.Path) -> Simulation:
    return simulate(
        paths=(str(path),),
        cycles=1,
        until_idle=False,
        max_time="24h",
        actions_text=None,
        config_path=None,
        start_time=None,
    )


def test_a_cycle_at_rest_gives_every_waiting_group_its_fix_and_memory_holds_while_the_settings_do(
    tmp_path: pathlib.Path,
) -> None:
    sim = rest_sim(REST / "three-wait.yaml")
    explainer = explaining.CycleExplainer()
    lost = (
        'queue "zzz" does not exist; create it or set the kai.scheduler/queue label to one of: '
        "a, b, c, default-queue, team"
    )

    # one dry run's worth is enough for all: on a cycle at rest a change to one group alone is tried
    # with the other groups left out (a fifth of a dry run), and big-1, big-0's twin (the same pod in
    # the same queue), shares big-0's; lost's three candidate queues all fail
    said = by_workload(explain(sim, explainer, version=1))
    fixed = "pod big-{} asks 12 GPUs; the largest node has 8 GPUs; to run it: reduce to 8 GPUs per pod"
    assert said == {"Pod/big-0": fixed.format(0), "Pod/big-1": fixed.format(1), "Pod/lost": lost}
    search = explainer.fixes.known()["default/" + lost_group(sim)]
    assert (search.done, search.tried, search.found) == (True, 3, None)
    standing, chosen = explainer.plan(1, waiting(sim), busy=False)
    assert standing is not None and by_workload(standing) == said and not chosen

    # the cluster changed elsewhere: the groups' reasons are the same words, their searches stand
    said = by_workload(explain(sim, explainer, version=2))
    assert said == {"Pod/big-0": fixed.format(0), "Pod/big-1": fixed.format(1), "Pod/lost": lost}
    assert all(s.basis == search.basis for s in explainer.fixes.known().values())

    # queue a's GPU limit was raised: nothing the groups' words mention, but their searches ran on
    # the old settings, so what they found no longer counts and they are searched again: moving lost
    # to queue a now works
    raised = tmp_path / "raised.yaml"
    limit = "name: a}}\nspec:\n  parentQueue: root\n  resources: {{gpu: {{quota: 0, limit: {},"
    raised.write_text((REST / "three-wait.yaml").read_text().replace(limit.format(0), limit.format(8)))
    sim = rest_sim(raised)
    said = by_workload(explain(sim, explainer, version=3))
    moved = f"{lost}; to run it: set the kai.scheduler/queue label of lost to a"
    assert said == {"Pod/big-0": fixed.format(0), "Pod/big-1": fixed.format(1), "Pod/lost": moved}

    # the node grew to 10 GPUs (and queue a's limit is 0 again): the big pods' reasons changed, lost's
    # settings did: nothing found before counts, and the searches start over
    grown = tmp_path / "grown.yaml"
    grown.write_text((REST / "three-wait.yaml").read_text().replace('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "10"'))
    sim = rest_sim(grown)
    said = by_workload(explain(sim, explainer, version=4))
    grown_fix = "pod big-{} asks 12 GPUs; the largest node has 10 GPUs; to run it: reduce to 10 GPUs per pod"
    assert said == {"Pod/big-0": grown_fix.format(0), "Pod/big-1": grown_fix.format(1), "Pod/lost": lost}


def waiting(sim: Simulation) -> list[Job]:
    assert sim.last_cycle is not None
    return engine.waiting_jobs(sim.last_cycle[1])


def lost_group(sim: Simulation) -> str:
    assert sim.last_cycle is not None
    [job] = [j for j in sim.last_cycle[0].jobs if j.display_name == "lost"]
    return job.name
