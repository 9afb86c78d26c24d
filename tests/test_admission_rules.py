"""The admission webhooks' mutation of a GPU-sharing pod (kai.cluster.admission.mutate_pod): the
ConfigMap it names and the env references of the container that gets the fraction. What the API
server makes of it, and every refusal, is checked end to end in tests/kubernetes/run/test_run_webhooks.py."""

from __future__ import annotations

from typing import Any

from kai.cluster.admission import mutate_pod

REFS = ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")


def pod(annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "generateName": "vllm-test-07-5979b99584-",
            "annotations": annotations,
            "ownerReferences": [{"kind": "ReplicaSet", "name": "vllm-test-07-5979b99584"}],
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [
                {"name": "proxy", "image": "envoy"},
                {"name": "vllm", "image": "vllm", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
            ],
            **spec,
        },
    }


def test_the_named_container_reads_its_devices_from_the_pods_configmap() -> None:
    obj = pod({"gpu-fraction": "0.7", "gpu-fraction-container-name": "vllm"})
    verdict = mutate_pod(obj, scheduler_name="kai-scheduler", suffix="abc1234", runtime_class="nvidia")
    base = "vllm-test-07-5979b99584-abc1234-shared-gpu"
    assert verdict.allowed
    assert list(verdict.patch) == [
        {"op": "add", "path": "/metadata/annotations/runai~1shared-gpu-configmap", "value": base},
        {
            "op": "add",
            "path": "/spec/containers/1/env",
            "value": [{"name": k, "valueFrom": {"configMapKeyRef": {"name": f"{base}-1", "key": k}}} for k in REFS],
        },
        {"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"},
    ]


def test_other_pods_are_left_alone() -> None:
    whole = pod({})
    other_scheduler = pod({"gpu-fraction": "0.5"}, schedulerName="default-scheduler")
    for obj in (whole, other_scheduler):
        assert mutate_pod(obj, scheduler_name="kai-scheduler", suffix="x", runtime_class="nvidia").patch == ()
