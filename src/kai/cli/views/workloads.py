"""Names people recognise for PodGroups: the workload they submitted (`raycluster/ray-big`).

The pod grouper names a PodGroup after its top owner plus a uid (`pg-build-pod-00000003-...`),
and records the owner in the `kai.scheduler/top-owner-metadata` annotation; a PodGroup the user
applied is shown as itself (`podgroup/llm-pretrain`).
"""

from __future__ import annotations

from typing import Any

import yaml

from kai.podgrouper.config import TOP_OWNER_METADATA_ANNOTATION


def workload_of(group: dict[str, Any]) -> str:
    """`kind/name` of the workload behind a PodGroup of the `kai sim` JSON document."""
    text = group["annotations"].get(TOP_OWNER_METADATA_ANNOTATION)
    if text:
        try:
            owner = yaml.safe_load(text)
        except yaml.YAMLError:
            owner = None
        if isinstance(owner, dict) and owner.get("kind") and owner.get("name"):
            return f"{str(owner['kind']).lower()}/{owner['name']}"
    return f"podgroup/{group['name']}"


def workloads(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Every PodGroup's workload, keyed by (namespace, PodGroup name)."""
    return {(g["namespace"], g["name"]): workload_of(g) for g in doc["podGroups"]}


def preemptor_workload(doc: dict[str, Any], preemptor: str | None) -> str:
    """The workload of an eviction's preemptor (`namespace/podgroup`), or the name as given."""
    if not preemptor:
        return "<none>"
    namespace, _, name = preemptor.partition("/")
    return workloads(doc).get((namespace, name), preemptor)


def humanize(doc: dict[str, Any], text: str) -> str:
    """`text` with generated PodGroup names (`default/pg-build-pod-0000...`) replaced by their workloads."""
    names = {
        f"{namespace}/{name}": label
        for (namespace, name), label in workloads(doc).items()
        if not label.startswith("podgroup/")
    }
    for key in sorted(names, key=len, reverse=True):
        text = text.replace(key, names[key])
    return text
