"""`kai run` decides as `kai sim` does: the same manifests on a real API server and in the simulator
end with the same pods bound, the same PodGroups waiting for the same reason, and the same queue
figures.

The scenario's outcome does not hang on tie-breaks the two cannot share (the API server gives
random uids and one-second creation times), so it must match exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from string import Template
from typing import Any

from click.testing import CliRunner

from kai.cli.main import main
from kai.kubernetes import client as kc
from kai.kubernetes import resources
from tests.kubernetes.run.conftest import NodeFactory, Objects, RunKai
from tests.kubernetes.run.support import DEPARTMENT, QUEUE, eventually, get, items, unique
from tests.kubernetes.run.test_run_scheduling import node_of, pods

WORKLOADS = Template("""
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: gang-a}
spec: {minMember: 2, queue: $team_a, priorityClassName: train}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: gang-b}
spec: {minMember: 2, queue: $team_b, priorityClassName: train}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: too-big}
spec: {minMember: 3, queue: $team_b, priorityClassName: train}
""")

POD = Template("""
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {kai.scheduler/queue: $queue}
  annotations: {$annotations}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: example.invalid/idle
    resources:
      requests: {cpu: "$cpu"}
      limits: {nvidia.com/gpu: "$gpus"}
""")

NODE = Template("""
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {kubernetes.io/hostname: $name}
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
  conditions: [{type: Ready, status: "True"}]
""")


def manifests(team_a: str, team_b: str, dept: str) -> str:
    docs = [
        DEPARTMENT.substitute(name=dept),
        QUEUE.substitute(name=team_a, parent=dept, gpu_quota=8, gpu_limit=-1),
        QUEUE.substitute(name=team_b, parent=dept, gpu_quota=8, gpu_limit=12),
        WORKLOADS.substitute(team_a=team_a, team_b=team_b),
    ]
    for i in range(2):
        docs.append(POD.substitute(name=f"a-{i}", queue=team_a, gpus=4, cpu="1", annotations="pod-group-name: gang-a"))
        docs.append(POD.substitute(name=f"b-{i}", queue=team_b, gpus=4, cpu="1", annotations="pod-group-name: gang-b"))
    for i in range(3):  # 18 GPUs: more than the cluster has
        docs.append(
            POD.substitute(name=f"big-{i}", queue=team_b, gpus=6, cpu="1", annotations="pod-group-name: too-big")
        )
    docs.append(POD.substitute(name="solo-a", queue=team_a, gpus=0, cpu="2", annotations=""))
    docs.append(POD.substitute(name="solo-b", queue=team_b, gpus=1, cpu="1", annotations=""))
    return "\n---\n".join(docs)


async def test_kai_run_ends_where_kai_sim_ends(
    kube: kc.KubeClient, namespace: str, objects: Objects, nodes: NodeFactory, run_kai: RunKai, tmp_path: Path
) -> None:
    names = {"team_a": unique("team-a"), "team_b": unique("team-b"), "dept": unique("dept")}
    node_names = [await nodes(gpus=8), await nodes(gpus=8)]
    text = manifests(**names)
    await objects.create(text)

    # the simulator, on the same objects (its own nodes standing for the test's)
    sim_input = tmp_path / "scenario.yaml"
    sim_input.write_text(
        "\n---\n".join([*(NODE.substitute(name=n) for n in node_names), text.replace("$ns", namespace)])
    )
    result = CliRunner().invoke(main, ["sim", "-f", str(sim_input), "--until-idle", "-o", "json"])
    assert result.exit_code == 0, result.output
    sim = json.loads(result.stdout)
    sim_bound = {p["name"]: p["node"] for p in sim["pods"] if p["phase"] == "Running"}
    sim_waiting = {p["name"] for p in sim["pods"] if p["phase"] == "Pending"}
    assert sim_bound and sim_waiting, "the scenario has both outcomes"

    async with run_kai():

        async def settled() -> dict[str, dict[str, Any]] | None:
            found = await pods(kube, namespace)
            bound = {name for name, p in found.items() if node_of(p)}
            return found if bound == set(sim_bound) else None

        found = await eventually(settled, timeout=45)
        gpus_per_node: dict[str, float] = {}
        for pod in found.values():
            if node_of(pod):
                limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
                node = node_of(pod) or ""
                gpus_per_node[node] = gpus_per_node.get(node, 0.0) + float(limits.get("nvidia.com/gpu", 0))
        sim_per_node: dict[str, float] = {}
        for name, node in sim_bound.items():
            pod = found[name]
            limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
            sim_per_node[node] = sim_per_node.get(node, 0.0) + float(limits.get("nvidia.com/gpu", 0))
        assert sorted(gpus_per_node.values()) == sorted(sim_per_node.values())

        sim_groups = {g["name"]: g for g in sim["podGroups"]}
        want = {name: [c["reason"] for c in sim_groups[name]["conditions"]] for name in ("gang-a", "gang-b", "too-big")}

        async def conditions_match() -> dict[str, list[str]]:
            # a status is a report: it may reach the API server after the bindings (kai.kubernetes.writer)
            got = {}
            for name in want:
                group = await get(kube, resources.PODGROUPS, name, namespace)
                got[name] = [c["reason"] for c in (group.get("status") or {}).get("schedulingConditions") or []]
            assert got == want, got
            return got

        assert await eventually(conditions_match, timeout=45) == want

        sim_queues = {q["name"]: q for q in sim["queues"]}

        async def queue_figures_match() -> bool:
            for queue in (names["team_a"], names["team_b"]):
                status = (await get(kube, resources.QUEUES, queue)).get("status") or {}
                want = sim_queues[queue]
                got_gpu = float((status.get("allocated") or {}).get("nvidia.com/gpu", "-1"))
                fair_gpu = float((status.get("fairShare") or {}).get("nvidia.com/gpu", "-1"))
                if got_gpu != want["allocated"]["gpu"] or fair_gpu != want["fairShare"]["gpu"]:
                    return False
            return True

        await eventually(queue_figures_match, timeout=20)
        events = await items(kube, resources.EVENTS, namespace)
        assert any(e.get("reason") == "Scheduled" for e in events)
