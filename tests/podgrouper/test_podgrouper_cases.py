"""Table tests for the pod grouper: owner chains in, PodGroup metadata (or a grouping error) out.

Each ``cases/*.yaml`` file has optional file-level ``objects`` (the object store: owners, related
objects, other pods) and a list of ``cases``. A case gives the ``pod`` to group, extra ``objects``,
optional ``config`` overrides, and either ``want`` (the PodGroup) or ``want_error``.

In ``want``, ``name``, ``min_member``, ``queue``, ``priority_class_name`` and ``owner`` are required;
``preemptibility``, ``sub_groups``, ``pod_sub_group``, ``warnings`` and ``topology`` are always
compared, against their empty defaults when omitted; ``namespace``, ``labels`` and ``annotations``
are compared only when given.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai.podgrouper import base, config, grouping, model, objects, top_owner

CASES_DIR = Path(__file__).parent / "cases"
REQUIRED = ("name", "min_member", "queue", "priority_class_name", "owner")
DEFAULTED: Mapping[str, Any] = {
    "preemptibility": None,
    "sub_groups": [],
    "pod_sub_group": None,
    "warnings": [],
    "topology": None,
}
OPTIONAL = ("namespace", "labels", "annotations")


def _load_cases() -> list[Any]:
    params = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        shared = document.get("objects") or []
        for case in document["cases"]:
            params.append(pytest.param(path.stem, shared, case, id=f"{path.stem}/{case['name']}"))
    return params


class Store:
    """The object store a simulator would hold: objects keyed by namespace, API group, kind and name."""

    def __init__(self, items: Sequence[Mapping[str, Any]]) -> None:
        self.items = list(items)
        self.lookups: list[tuple[str, str, str, str]] = []

    def get(self, namespace: str, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        self.lookups.append((namespace, api_version, kind, name))
        group = objects.group_of(api_version)
        for item in self.items:
            if (
                objects.kind(item) == kind
                and objects.name(item) == name
                and objects.group_of(objects.api_version(item)) == group
                and objects.namespace(item) in ("", namespace)
            ):
                return item
        return None

    def list_pods(self, namespace: str, match_labels: Mapping[str, str]) -> Sequence[Mapping[str, Any]]:
        return [
            item
            for item in self.items
            if objects.kind(item) == "Pod"
            and objects.namespace(item) == namespace
            and all(objects.labels(item).get(k) == v for k, v in match_labels.items())
        ]


def _config(raw: Mapping[str, Any] | None) -> config.GrouperConfig:
    raw = dict(raw or {})
    if "kind_defaults" in raw:
        raw["kind_defaults"] = config.parse_kind_defaults(text=raw["kind_defaults"])
    return config.GrouperConfig(**raw)


def _topology(constraint: model.TopologyConstraint | None) -> Any:
    if constraint is None:
        return None
    return {
        "topology": constraint.topology,
        "required": constraint.required_level,
        "preferred": constraint.preferred_level,
    }


def _sub_group(sub_group: model.SubGroup) -> list[Any]:
    row: list[Any] = [sub_group.name, sub_group.min_member]
    if sub_group.parent is not None or sub_group.topology is not None:
        row.append(sub_group.parent)
    if sub_group.topology is not None:
        row.append(_topology(sub_group.topology))
    return row


def render(result: model.PodGroupMetadata) -> dict[str, Any]:
    """The metadata in the compact form the YAML tables use."""
    owner = result.owner
    return {
        "name": result.name,
        "namespace": result.namespace,
        "min_member": result.min_member,
        "queue": result.queue,
        "priority_class_name": result.priority_class_name,
        "preemptibility": result.preemptibility,
        "owner": f"{owner.api_version} {owner.kind} {owner.name} {owner.uid}",
        "sub_groups": [_sub_group(sg) for sg in result.sub_groups],
        "pod_sub_group": result.pod_sub_group,
        "labels": dict(result.labels),
        "annotations": dict(result.annotations),
        "topology": _topology(result.topology),
        "warnings": [[w.reason, w.message] for w in result.warnings],
    }


def run_case(shared: Sequence[Mapping[str, Any]], case: Mapping[str, Any]) -> tuple[model.GroupingResult, Store]:
    pod = case["pod"]
    store = Store([*shared, *(case.get("objects") or []), pod])
    chain = top_owner.owner_chain(pod=pod, lookup=store.get)
    if isinstance(chain, model.GroupingError):
        return chain, store
    view = base.ClusterView(lookup=store.get, list_pods=store.list_pods)
    return grouping.group_pod(pod=pod, chain=chain, config=_config(case.get("config")), view=view), store


@pytest.mark.parametrize(("file", "shared", "case"), _load_cases())
def test_case(file: str, shared: list[Mapping[str, Any]], case: Mapping[str, Any]) -> None:
    before = copy.deepcopy((shared, case))
    result, _store = run_case(shared, case)
    assert (shared, case) == before, "the grouper modified its input objects"

    if "want_error" in case:
        want_error = case["want_error"]
        assert isinstance(result, model.GroupingError), f"expected an error, got {render(result)}"
        assert result.reason == want_error["reason"]
        assert result.message == want_error["message"]
        assert [[w.reason, w.message] for w in result.warnings] == want_error.get("warnings", [])
        return

    assert not isinstance(result, model.GroupingError), f"unexpected error {result.reason}: {result.message}"
    want = case["want"]
    missing = [key for key in REQUIRED if key not in want]
    assert not missing, f"case {case['name']} must state {missing}"
    got = render(result)
    expected = {key: want[key] for key in REQUIRED}
    expected.update({key: want.get(key, default) for key, default in DEFAULTED.items()})
    expected.update({key: want[key] for key in OPTIONAL if key in want})
    unknown = set(want) - set(expected)
    assert not unknown, f"case {case['name']} has unknown keys {sorted(unknown)}"
    assert {key: got[key] for key in expected} == expected
