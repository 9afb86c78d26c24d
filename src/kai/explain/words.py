"""How explanations write amounts, pod shapes and node summaries (one place for every view)."""

from __future__ import annotations

from collections.abc import Sequence

from kai.actions.common.victims import amount
from kai.core.model import Task
from kai.core.resources import CPU, GPU, MEMORY, QUEUE_RESOURCE_NAMES

# node-space resource position -> queue-space position (gpu 0, cpu 1, memory 2)
TO_QUEUE_SPACE = {GPU: 0, CPU: 1, MEMORY: 2}


def queue_amount(resource: int, value: float) -> str:
    """A queue-space amount (resource 0 gpu, 1 cpu, 2 memory): `8 GPUs`, `4 CPU`, `16 GB`."""
    return amount(resource, value)


def node_amount(resource: int, value: float, names: Sequence[str]) -> str:
    """A node-space amount: core resources as `queue_amount` writes them, others with their name."""
    if resource in TO_QUEUE_SPACE:
        return amount(TO_QUEUE_SPACE[resource], value)
    return f"{value:g} {names[resource]}"


def number(resource: int, value: float) -> str:
    """Only the number of a queue-space amount, in the unit `queue_amount` names."""
    return amount(resource, value).split()[0]


def resource_name(resource: int) -> str:
    return QUEUE_RESOURCE_NAMES[resource]


def main_node_resource(task: Task) -> int:
    """The resource a message about a pod talks about: GPUs if it asks for any, else CPU, else memory."""
    for r in (GPU, CPU, MEMORY):
        if task.request[r] > 0:
            return r
    return GPU


def task_gpus(task: Task) -> float:
    """GPUs a pod asks for: whole devices, or its portion of shared devices."""
    return float(task.request[GPU]) + task.gpu_portion * max(1, task.gpu_devices)


def shape(runs: Sequence[tuple[Task, int]], names: Sequence[str]) -> str:
    """`4 pods x 2 GPUs`, or `3 pods (1 x 1 GPU, 2 x 2 GPUs)` when the pods differ. `runs`: the pods
    in order as (pod, how many like it in a row)."""
    counts: dict[str, int] = {}
    for task, count in runs:
        r = main_node_resource(task)
        value = task_gpus(task) if r == GPU else float(task.request[r])
        text = node_amount(r, value, names)
        counts[text] = counts.get(text, 0) + count
    n = sum(count for _, count in runs)
    pods = f"{n} pod" + ("" if n == 1 else "s")
    if len(counts) == 1:
        return f"{pods} x {next(iter(counts))}"
    return f"{pods} (" + ", ".join(f"{c} x {text}" for text, c in counts.items()) + ")"


def listing(items: Sequence[str], *, limit: int = 3) -> str:
    """`a, b and c`, or `a, b, c and 2 more`."""
    if len(items) > limit:
        return ", ".join(items[:limit]) + f" and {len(items) - limit} more"
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
