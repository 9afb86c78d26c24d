"""Binding outputs as KAI's binder writes them: device indices, group label, resource type, env."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from kai.cli.main import main

NODE = """apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {nvidia.com/gpu.memory: "40960"}}
status: {allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}}
"""


def pod(name: str, *, gpus: int = 0, annotations: str = "{}", duration: str | None = None) -> str:
    limits = f'{{nvidia.com/gpu: "{gpus}"}}' if gpus else "{}"
    if duration:
        separator = ", " if annotations != "{}" else ""
        annotations = annotations[:-1] + separator + f"sim.kai.scheduler/duration: {duration}}}"
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, annotations: {annotations}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: busybox, resources: {{limits: {limits}}}}}]
"""


def run(text: str, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["sim", "-f", "-", *args, "-o", "json"], input=text)
    assert result.exit_code == 0, result.output
    return {p["name"]: p for p in json.loads(result.stdout)["pods"]}


def test_whole_gpu_pods_get_distinct_devices() -> None:
    pods = run(NODE + pod("a", gpus=2) + pod("b", gpus=2))
    assert pods["a"]["gpuDevices"] == [0, 1]
    assert pods["b"]["gpuDevices"] == [2, 3]
    assert pods["a"]["env"] == {"NVIDIA_VISIBLE_DEVICES": "0,1"}
    assert pods["a"]["annotations"]["received-resource-type"] == "Regular"
    assert pods["a"]["gpuGroups"] == []


def test_fractions_share_a_device_and_report_their_portion() -> None:
    pods = run(
        NODE
        + pod("w", gpus=1)
        + pod("f1", annotations='{gpu-fraction: "0.5"}')
        + pod("f2", annotations='{gpu-memory: "10240"}')
    )
    assert pods["f1"]["gpuDevices"] == pods["f2"]["gpuDevices"] == [1]
    assert pods["f1"]["labels"]["runai-gpu-group"] == pods["f2"]["labels"]["runai-gpu-group"]
    assert pods["f1"]["annotations"]["received-resource-type"] == "Fraction"
    assert pods["f1"]["env"]["GPU_PORTION"] == "0.50"
    # 10240 MiB of a 40960 MiB device is a quarter
    assert pods["f2"]["env"]["GPU_PORTION"] == "0.25"
    assert pods["f2"]["gpuFraction"] == 0.25


def test_multi_device_fraction_takes_one_group_per_device() -> None:
    pods = run(NODE + pod("m", annotations='{gpu-fraction: "0.5", gpu-fraction-num-devices: "2"}'))
    assert len(pods["m"]["gpuGroups"]) == 2
    assert sorted(pods["m"]["gpuDevices"]) == [0, 1]
    assert pods["m"]["env"]["NVIDIA_VISIBLE_DEVICES"] in ("0,1", "1,0")


def test_devices_are_freed_when_a_pod_finishes() -> None:
    text = NODE + pod("first", gpus=4, duration="10s") + pod("second", gpus=1)
    pods = run(text, "--until-idle")
    assert pods["first"]["phase"] == "Succeeded"
    assert pods["second"]["gpuDevices"] == [0]


def test_gpu_memory_larger_than_any_device_is_explained() -> None:
    pods = run(NODE + pod("huge", annotations='{gpu-memory: "81920"}'))
    assert pods["huge"]["phase"] == "Pending"
    assert "gpu-memory" in pods["huge"]["message"]


def test_a_node_declaring_a_huge_gpu_count_still_hands_out_its_lowest_devices() -> None:
    # nothing bounds nvidia.com/gpu: the device plugin's ledger must not list every device it has
    huge = NODE.replace('nvidia.com/gpu: "4"', 'nvidia.com/gpu: "1e16"')
    pods = run(huge + pod("a", gpus=2) + pod("f", annotations='{gpu-fraction: "0.5"}'))
    assert pods["a"]["gpuDevices"] == [0, 1]
    assert pods["f"]["gpuDevices"] == [2]
