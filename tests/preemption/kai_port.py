"""KAI's action tests restated as kai scenario tables: compact case files in, scenario directories out.

KAI's own tests (`pkg/scheduler/actions/{reclaim,preempt,consolidation,stalegangeviction}/*_test.go`
in NVIDIA/KAI-Scheduler) describe each case as nodes, queues, jobs and expected task states. The
files under `tests/preemption/kai_cases/` restate those facts compactly (one YAML list per KAI test
file); `render` turns one case into the manifests.yaml + expect.yaml pair that `kai sim` and
`check-sim-cases` read, applying the KAI harness defaults:

* nodes: 20 CPU, 20G memory, GPU memory 100 units (label `nvidia.com/gpu.memory: "100"`);
* queues: CPU and memory quota/limit -1 unless set (`cpu`/`cpuLimit` in millicores, `memory`/`memoryLimit`
  in MB, the Queue CRD's units, as KAI's DeservedCPUs/MaxAllowedCPUs/DeservedMemory/MaxAllowedMemory
  are written straight into it), GPU limit 0 means unlimited, GPU overQuotaWeight 0 unless set,
  created in list order; without departments every queue hangs under `default` (GPU quota and
  limit -1; KAI's weight -1 is written as 1, which the CRD accepts and which has no effect since
  `default` has no siblings); a department's GPU weight is its deserved GPUs;
* jobs: minMember = number of tasks unless `min` is given; `age` in minutes sets the creation time;
  without it, as in KAI's harness, jobs are stably sorted by priority (highest first) and job i of
  N is N - i minutes old (jobs of the same age are ordered by name, as KAI breaks ties by UID); priorities 50, 75,
  100, 125 use KAI's default classes, other values get a PriorityClass of that value;
* tasks: a node name means Running there, `~` means Pending; a task written as a mapping takes `node`,
  `subgroup`, `gpuGroup` and:
  - `phase: Succeeded` or `phase: Failed` (KAI's finished task states): the pod is written with that
    `status.phase` (and its `node` as `spec.nodeName` if given);
  - `affinity: [node names]` (KAI's NodeAffinityNames): a required node affinity `kubernetes.io/hostname
    In <names>` (KAI's harness matches its own per-node label holding the node name; same nodes);
  - `priority: N` (KAI's TestTaskBasic.Priority): the pod label `kai.scheduler/task-priority: "N"`;
* `minSubGroup: K` (KAI's root SubGroupSet.SetMinSubGroup): the PodGroup spec gets `minSubGroup` instead
  of `minMember`; a subgroup written as a mapping `{minMember: N}` or `{minSubGroup: K, parent: P}`
  nests the tree (a plain number is the leaf's `minMember`);
* optional PodGroup settings per job: `preemptionDelay` and `stalenessGracePeriod` (Go durations,
  written to the PodGroup spec), `safeToConsolidate` (bool, spec), `lastEvictionMinutesAgo` (the
  `kai.scheduler/last-eviction-timestamp` annotation, like `startedMinutesAgo` for the last start).

Expected states: `Running [node]` (KAI's Running or Binding), `Pipelined node`, `Releasing [node]`,
`Pending`, `Moved node`, `Succeeded`, `Failed` (finished pods: the simulator reports no node for them,
so none is checked even where KAI names one), per job (all its pods; keyed by the job name as written)
or per pod (keyed by the pod's Kubernetes name: the job name with `_` as `-`, then `-<i>`); any other
key is an error. `Moved node` is a running
victim KAI's harness shows Pipelined on `node` (re-placed there); kai's simulator reports a moved
pod as Releasing on its old node (sim contract), so the expectation is Releasing on the node the
pod runs on, and `test_kai_port` checks that its eviction event names `node` as the destination.

A case with a `pending` reason is one where kai still differs from KAI; it is kept with the reason
and not written out. Run `python -m tests.preemption.kai_port` to rewrite `tests/scenarios/kai-*` from the case files
(directories of cases that became pending are removed);
`tests/preemption/test_kai_port.py` fails when they are out of date.
"""

from __future__ import annotations

import pathlib
import re
import shutil
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

HERE = pathlib.Path(__file__).parent
CASES_DIR = HERE / "kai_cases"
SCENARIOS = HERE.parent / "scenarios"
BASE = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)  # the newest creation time: the simulation's "now"
DEFAULT_CLASSES = {50: "train", 75: "build-preemptible", 100: "build", 125: "inference"}
STATE = re.compile(r"^(Running|Pipelined|Releasing|Pending|Moved|Succeeded|Failed)(?:\s+(\S+))?$")
FINISHED = ("Succeeded", "Failed")
HOSTNAME = "kubernetes.io/hostname"
TASK_PRIORITY = "kai.scheduler/task-priority"


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _k8s(name: str) -> str:
    return name.replace("_", "-").lower()


def _num(value: float) -> str:
    return f"{value:g}"


def _queue_doc(q: dict[str, Any], created: datetime, *, parent: str | None, weight: float) -> dict[str, Any]:
    limit = float(q.get("limit", 0))
    spec: dict[str, Any] = {
        "resources": {
            "cpu": {"quota": q.get("cpu", -1), "limit": q.get("cpuLimit", -1), "overQuotaWeight": 1},
            "memory": {"quota": q.get("memory", -1), "limit": q.get("memoryLimit", -1), "overQuotaWeight": 1},
            "gpu": {"quota": q.get("deserved", 0), "limit": -1 if limit == 0 else limit, "overQuotaWeight": weight},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    for key in ("priority", "preemptMinRuntime", "reclaimMinRuntime"):
        if key in q:
            spec[key] = q[key]
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": _k8s(q["name"]), "creationTimestamp": _stamp(created)},
        "spec": spec,
    }


def _pod_doc(job: dict[str, Any], index: int, task: Any, created: datetime) -> dict[str, Any]:
    task = {"node": task} if not isinstance(task, dict) else task
    name = f"{_k8s(job['name'])}-{index}"
    gpus = float(task.get("gpus", job.get("gpus", 0)))
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    annotations = {"pod-group-name": _k8s(job["name"])}
    labels: dict[str, str] = {}
    if "cpu" in job:
        requests["cpu"] = f"{int(job['cpu'])}m"
    if "memory" in job:
        requests["memory"] = str(job["memory"])
    if "gpuMemory" in job:
        annotations["gpu-memory"] = str(job["gpuMemory"])
    elif 0 < gpus < 1:
        annotations["gpu-fraction"] = _num(gpus)
    elif gpus >= 1:
        limits["nvidia.com/gpu"] = _num(gpus)
    if "subgroup" in task:
        labels["kai.scheduler/subgroup-name"] = task["subgroup"]
    if "priority" in task:
        labels[TASK_PRIORITY] = str(int(task["priority"]))
    node = task.get("node")
    if node and "gpuGroup" in task:
        labels["runai-gpu-group"] = task["gpuGroup"]
    elif node and ("gpuMemory" in job or 0 < gpus < 1):
        labels["runai-gpu-group"] = f"{_k8s(job['name'])}-{index}"
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {}}
    if requests:
        container["resources"]["requests"] = requests
    if limits:
        container["resources"]["limits"] = limits
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations}
    if labels:
        meta["labels"] = labels
    meta["creationTimestamp"] = _stamp(created)
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": "kai-scheduler", "containers": [container]},
    }
    if task.get("affinity"):
        term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(task["affinity"])}]}
        doc["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    if "phase" in task and task["phase"] not in FINISHED:
        raise ValueError(f"job {job['name']} task {index}: phase must be one of {FINISHED}, not {task['phase']!r}")
    phase = task.get("phase", "Running" if node else None)
    if node:
        doc["spec"]["nodeName"] = node
    if phase is not None:
        doc["status"] = {"phase": phase}
    return doc


def _subgroup_doc(name: str, value: Any) -> dict[str, Any]:
    """A subgroup entry: `name: <minMember>`, or `name: {minMember|minSubGroup: N, parent: P}`."""
    if not isinstance(value, dict):
        return {"name": name, "minMember": value}
    unknown = set(value) - {"minMember", "minSubGroup", "parent"}
    if unknown:
        raise ValueError(f"subgroup {name}: unknown keys {sorted(unknown)}")
    doc: dict[str, Any] = {"name": name}
    doc.update({k: value[k] for k in ("minMember", "minSubGroup", "parent") if k in value})
    return doc


def _expect_pod(state: str, *, running_on: str | None) -> dict[str, Any]:
    m = STATE.match(state)
    if m is None:
        raise ValueError(f"bad expected state {state!r}")
    phase, node = m.group(1), m.group(2)
    if phase in FINISHED and node is not None:
        raise ValueError(f"{state!r}: a finished pod's node is not reported, write {phase!r} alone")
    if phase == "Moved":
        if node is None or running_on is None:
            raise ValueError(f"{state!r} needs a destination node and a running pod")
        phase, node = "Releasing", running_on
    out: dict[str, Any] = {"phase": phase}
    if node and phase == "Pipelined":
        out["nominatedNode"] = node
    elif node:
        out["node"] = node
    return out


def _ages(jobs: list[dict[str, Any]]) -> dict[str, float]:
    """Job ages in minutes as KAI's harness sets them: jobs stably sorted by priority (highest first),
    then job i of N is N - i minutes old unless it gives its own (non-zero) age."""
    ranked = sorted(jobs, key=lambda j: -int(j.get("priority", 50)))
    return {j["name"]: float(j.get("age") or len(ranked) - i) for i, j in enumerate(ranked)}


def render(case: dict[str, Any], *, area: str) -> tuple[str, str, str]:
    """(directory name, manifests.yaml text, expect.yaml text) for one case."""
    title = f'KAI {case["file"]}: "{case["kai"]}"'
    notes = [title, *(case.get("note", "").split("\n") if case.get("note") else [])]
    header = "".join(f"# {line}\n" for line in notes if line)
    docs: list[dict[str, Any]] = []
    for name, node in case["nodes"].items():
        node = node or {}
        labels = {"kubernetes.io/hostname": name, **node.get("labels", {})}
        gpus = node.get("gpus", 0)
        if gpus:
            labels["nvidia.com/gpu.memory"] = "100"
        allocatable = {
            "cpu": f"{int(node.get('cpu', 20000))}m",
            "memory": str(node.get("memory", "20G")),
            "nvidia.com/gpu": str(gpus),
            "pods": str(node.get("pods", 110)),
        }
        meta = {"name": name, "labels": labels, "creationTimestamp": _stamp(BASE)}
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": allocatable}})
    queue_time = BASE - timedelta(days=1)
    departments = case.get("departments") or []
    if not departments:
        docs.append(_queue_doc({"name": "default", "deserved": -1, "limit": -1}, queue_time, parent=None, weight=1))
    for i, d in enumerate(departments):
        weight = d.get("deserved", 0)
        weight = 1 if weight < 0 else weight  # an unlimited department: KAI's -1 weight written as 1, as for `default`
        docs.append(_queue_doc(d, queue_time + timedelta(seconds=i), parent=None, weight=weight))
    for i, q in enumerate(case["queues"]):
        parent = q.get("parent") or ("default" if not departments else None)
        created = queue_time + timedelta(seconds=100 + i)
        docs.append(_queue_doc(q, created, parent=_k8s(parent) if parent else None, weight=q.get("weight", 0)))
    classes = sorted({int(j.get("priority", 50)) for j in case["jobs"]} - set(DEFAULT_CLASSES))
    for value in classes:
        docs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"priority-{value}"},
                "value": value,
            }
        )
    ages = _ages(case["jobs"])
    order = sorted(case["jobs"], key=lambda j: (-ages[j["name"]], j["name"]))
    rank = {j["name"]: i for i, j in enumerate(order)}
    for job in case["jobs"]:
        age = timedelta(minutes=ages[job["name"]])
        created = BASE - age - timedelta(seconds=len(order) - rank[job["name"]])
        priority = int(job.get("priority", 50))
        pg_meta: dict[str, Any] = {
            "name": _k8s(job["name"]),
            "namespace": "default",
            "creationTimestamp": _stamp(created),
        }
        annotations = {}
        if "startedMinutesAgo" in job:
            started = BASE - timedelta(minutes=job["startedMinutesAgo"])
            annotations["kai.scheduler/last-start-timestamp"] = _stamp(started)
        if "staleSeconds" in job:
            stale = BASE - timedelta(seconds=job["staleSeconds"])
            annotations["kai.scheduler/stale-podgroup-timestamp"] = _stamp(stale)
        if "lastEvictionMinutesAgo" in job:
            evicted = BASE - timedelta(minutes=job["lastEvictionMinutesAgo"])
            annotations["kai.scheduler/last-eviction-timestamp"] = _stamp(evicted)
        if annotations:
            pg_meta["annotations"] = annotations
        gang: dict[str, int] = (
            {"minSubGroup": int(job["minSubGroup"])}
            if "minSubGroup" in job
            else {"minMember": int(job.get("min", len(job["tasks"])))}
        )
        spec: dict[str, Any] = {
            **gang,
            "queue": _k8s(job["queue"]),
            "priorityClassName": DEFAULT_CLASSES.get(priority, f"priority-{priority}"),
        }
        if "preemptible" in job:
            spec["preemptibility"] = "preemptible" if job["preemptible"] else "non-preemptible"
        if "subgroups" in job:
            spec["subGroups"] = [_subgroup_doc(n, m) for n, m in job["subgroups"].items()]
        for key in ("preemptionDelay", "stalenessGracePeriod", "safeToConsolidate"):
            if key in job:
                spec[key] = job[key]
        docs.append({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": pg_meta, "spec": spec})
        for i, task in enumerate(job["tasks"]):
            docs.append(_pod_doc(job, i, task, created))
    manifests = header + yaml.safe_dump_all(docs, sort_keys=False)

    known = {j["name"] for j in case["jobs"]} | {
        f"{_k8s(j['name'])}-{i}" for j in case["jobs"] for i in range(len(j["tasks"]))
    }
    unknown = sorted(set(case["expect"]) - known)
    if unknown:
        raise ValueError(f"case {case['name']}: expectations name no job or pod: {unknown}")
    pods: dict[str, Any] = {}
    for job in case["jobs"]:
        for i in range(len(job["tasks"])):
            pod = f"{_k8s(job['name'])}-{i}"
            state = case["expect"].get(pod, case["expect"].get(job["name"]))
            if state is not None:
                pods[f"default/{pod}"] = _expect_pod(state, running_on=_running_node(job["tasks"][i]))
    expect: dict[str, Any] = {"cycles": int(case.get("cycles", 1)), "actions": case.get("actions", [area])}
    if case.get("config"):
        expect["config"] = case["config"]
    expect["pods"] = pods
    name = f"kai-{area}-{case['name']}"
    return name, manifests, header + yaml.safe_dump(expect, sort_keys=False)


def _running_node(task: Any) -> str | None:
    if isinstance(task, dict):
        return str(task["node"]) if task.get("node") and task.get("phase") not in FINISHED else None
    return str(task) if task else None


def moves(case: dict[str, Any]) -> dict[str, str]:
    """Pods (`default/<pod>`) the case expects KAI to move, and the node each is moved to."""
    out: dict[str, str] = {}
    for job in case["jobs"]:
        for i in range(len(job["tasks"])):
            pod = f"{_k8s(job['name'])}-{i}"
            state = str(case["expect"].get(pod, case["expect"].get(job["name"], "")))
            m = STATE.match(state)
            if m is not None and m.group(1) == "Moved":
                out[f"default/{pod}"] = str(m.group(2))
    return out


def active_cases() -> list[tuple[str, dict[str, Any]]]:
    """(area, case) for every case that is not pending."""
    out: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        area = path.stem.split("_")[0]
        out.extend((area, case) for case in yaml.safe_load(path.read_text()) or [] if not case.get("pending"))
    return out


def all_cases() -> list[tuple[str, str, str]]:
    out = [render(case, area=area) for area, case in active_cases()]
    names = [n for n, _, _ in out]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate case names: {sorted(dupes)}")
    return out


def orphans() -> list[pathlib.Path]:
    """Generated-looking directories (`kai-<area>-*` of an area with case files) that no case produces."""
    names = {name for name, _, _ in all_cases()}
    areas = {path.stem.split("_")[0] for path in CASES_DIR.glob("*.yaml")}
    return sorted(
        d
        for d in SCENARIOS.iterdir()
        if d.is_dir() and d.name not in names and any(d.name.startswith(f"kai-{a}-") for a in areas)
    )


def write() -> list[str]:
    for stale in orphans():
        shutil.rmtree(stale)
    written = []
    for name, manifests, expect in all_cases():
        target = SCENARIOS / name
        target.mkdir(exist_ok=True)
        (target / "manifests.yaml").write_text(manifests)
        (target / "expect.yaml").write_text(expect)
        written.append(name)
    return written


if __name__ == "__main__":
    for written in write():
        print(written)
