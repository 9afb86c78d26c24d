"""Queue numbers as KAI takes them: every finite number loads and means what it means in KAI, left-out
resource values are KAI's zeros with a warning, and only what KAI's CRD and admission refuse is refused."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kai.cli.main import main
from tests.scenario_check import diff, run_sim

SCENARIOS = pathlib.Path(__file__).parent / "scenarios"
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def _default_department(case: pathlib.Path) -> bool:
    for doc in yaml.safe_load_all((case / "manifests.yaml").read_text()):
        if doc and doc.get("kind") == "Queue" and doc["metadata"]["name"] == "default":
            return "parentQueue" not in doc["spec"] and doc["spec"]["resources"]["gpu"]["quota"] == -1
    return False


HARNESS_CASES = sorted(
    c
    for c in SCENARIOS.iterdir()
    if c.name.startswith("kai-") and (c / "expect.yaml").exists() and _default_department(c)
)


@pytest.mark.parametrize("case", HARNESS_CASES, ids=[c.name for c in HARNESS_CASES])
def test_kai_cases_with_the_harness_parent_weight_of_minus_one(case: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """KAI's harness puts its queues under `default` with GPU overQuotaWeight -1; the outcome is KAI's.

    The tables restate KAI's cases with that weight written as 1; here each runs with KAI's -1. A lone
    top-level queue with quota -1 is satisfied in the deserved phase, so its weight never divides anything
    (resource_division: the over-quota phase only counts queues with remaining requests).
    """
    docs = list(yaml.safe_load_all((case / "manifests.yaml").read_text()))
    for doc in docs:
        if doc and doc.get("kind") == "Queue" and doc["metadata"]["name"] == "default":
            doc["spec"]["resources"]["gpu"]["overQuotaWeight"] = -1
    copy = tmp_path / case.name
    copy.mkdir()
    (copy / "manifests.yaml").write_text(yaml.safe_dump_all(docs))
    expect = yaml.safe_load((case / "expect.yaml").read_text())
    assert diff(run_sim(copy, expect, tmp_path), expect) == []


def sim(tmp_path: pathlib.Path, docs: list[dict[str, Any]], *args: str) -> Result:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json", "--actions", "allocate", *args])
    assert "Traceback" not in result.output
    return result


def queue(name: str, resources: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": resources}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod(name: str, queue_name: str, *, priority: str = "train", **limits: str) -> dict[str, Any]:
    resources = {"limits": {k.replace("_", "/").replace("nvidia/", "nvidia.com/"): v for k, v in limits.items()}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue_name}},
        "spec": {
            "schedulerName": "kai-scheduler",
            "priorityClassName": priority,
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def test_any_finite_number_loads(tmp_path: pathlib.Path) -> None:
    odd = {
        "gpu": {"quota": 1e9, "limit": -1, "overQuotaWeight": -2.5},
        "cpu": {"quota": -7, "limit": -1, "overQuotaWeight": 0},
        "memory": {"quota": 10, "limit": 5, "overQuotaWeight": 3},
    }
    result = sim(tmp_path, [queue("top", {k: UNLIMITED for k in odd}), queue("odd", odd, "top")])
    assert result.exit_code == 0, result.output
    [odd_out] = [q for q in json.loads(result.stdout)["queues"] if q["name"] == "odd"]
    assert odd_out["quota"] == {"gpu": 1e9, "cpu": -7.0, "memory": 10.0}
    assert odd_out["overQuotaWeight"]["gpu"] == -2.5
    assert "Queue odd: spec.resources.memory.quota: is 10, above the limit 5" in result.stderr


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"4"', 'must be a number, got "4" (a string: write it without quotes)'),
        (".nan", "must be a finite number, got nan"),
        ("-.inf", "must be a finite number, got -inf"),
        ("true", "must be a number, got True"),
    ],
)
def test_what_the_crd_refuses_is_refused(value: str, message: str, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\n"
        f"spec: {{resources: {{gpu: {{quota: {value}, limit: -1, overQuotaWeight: 1}}}}}}\n"
    )
    result = CliRunner().invoke(main, ["sim", "-f", str(path)])
    assert result.exit_code == 2
    assert f"document 1: Queue q: spec.resources.gpu.quota: {message}" in result.stderr


def test_a_negative_memory_quota_is_unlimited_as_in_kai(tmp_path: pathlib.Path) -> None:
    """KAI's proportion plugin reads memory as max(-1, value * 10^6): any negative memory quota is -1."""
    resources = {"gpu": UNLIMITED, "cpu": UNLIMITED, "memory": {"quota": -5, "limit": -1, "overQuotaWeight": 1}}
    docs = [queue("top", {k: UNLIMITED for k in ("gpu", "cpu", "memory")}), queue("q", resources, "top")]
    docs.append(pod("build-mem", "q", priority="build", memory="1Gi"))
    result = sim(tmp_path, docs)
    assert result.exit_code == 0, result.output
    [out] = json.loads(result.stdout)["pods"]
    assert out["phase"] == "Running"  # a quota of -5e6 bytes would have refused a non-preemptible job


def test_a_negative_gpu_quota_is_used_as_it_is(tmp_path: pathlib.Path) -> None:
    """For gpu and cpu KAI keeps the value: a quota of -5 refuses non-preemptible work (-5 < 0 + request)."""
    resources = {"gpu": {"quota": -5, "limit": -1, "overQuotaWeight": 1}, "cpu": UNLIMITED, "memory": UNLIMITED}
    docs = [queue("top", {k: UNLIMITED for k in ("gpu", "cpu", "memory")}), queue("q", resources, "top")]
    docs += [pod("build-gpu", "q", priority="build", nvidia_gpu="1"), pod("train-gpu", "q", nvidia_gpu="1")]
    result = sim(tmp_path, docs)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    phases = {p["name"]: p["phase"] for p in doc["pods"]}
    assert phases == {"build-gpu": "Pending", "train-gpu": "Running"}
    reasons = {c["reason"] for g in doc["podGroups"] for c in g["conditions"]}
    assert reasons == {"NonPreemptibleOverQuota"}


def test_a_limit_only_gates_what_the_job_asks_for(tmp_path: pathlib.Path) -> None:
    """KAI's capacity policy skips a resource the job does not request, whatever the limit."""
    resources = {"gpu": UNLIMITED, "cpu": {"quota": 0, "limit": -3, "overQuotaWeight": 1}, "memory": UNLIMITED}
    docs = [queue("top", {k: UNLIMITED for k in ("gpu", "cpu", "memory")}), queue("q", resources, "top")]
    docs += [pod("no-cpu", "q", nvidia_gpu="1"), pod("some-cpu", "q", cpu="1")]
    result = sim(tmp_path, docs)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {p["name"]: p["phase"] for p in doc["pods"]} == {"no-cpu": "Running", "some-cpu": "Pending"}


def test_a_gpu_only_queue_warns_at_load_time_and_in_the_output() -> None:
    case = SCENARIOS / "queue-gpu-only-section"
    result = CliRunner().invoke(
        main, ["sim", "-f", str(case / "manifests.yaml"), "-o", "json", "--actions", "allocate"]
    )
    assert result.exit_code == 0, result.output
    assert (
        "document 3: Queue team-gpu-only: spec.resources.cpu: is not set, so KAI reads quota 0, limit 0 and "
        "overQuotaWeight 0 for cpu: every pod that requests cpu is refused (OverLimit)"
    ) in result.stderr
    events = [e for e in json.loads(result.stdout)["events"] if e["reason"] == "QueueResourceUnset"]
    assert [(e["object"], e["message"].split(":")[0]) for e in events] == [
        ("Queue/team-gpu-only", "spec.resources.cpu"),
        ("Queue/team-gpu-only", "spec.resources.memory"),
    ]
    assert all(e["type"] == "Warning" for e in events)


def test_a_left_out_limit_warns_on_its_own(tmp_path: pathlib.Path) -> None:
    resources = {"gpu": {"quota": 2, "overQuotaWeight": 1}, "cpu": UNLIMITED, "memory": UNLIMITED}
    result = sim(tmp_path, [queue("q", resources)])
    assert result.exit_code == 0, result.output
    assert "Queue q: spec.resources.gpu.limit: is not set, so KAI reads 0: limit 0 refuses every pod" in result.stderr


def test_the_table_output_lists_the_load_warnings() -> None:
    case = SCENARIOS / "queue-gpu-only-section"
    result = CliRunner().invoke(main, ["sim", "-f", str(case / "manifests.yaml"), "--actions", "allocate"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the table wraps long messages
    assert "queue/team-gpu-only QueueResourceUnset: spec.resources.cpu: is not set, so KAI reads quota 0" in text
