"""Runs `kai explain` scenario tables and checks every suggestion the way a user would apply it.

A case is a directory with `manifests.yaml` and `expect.yaml`:

    flags: [--cycles, "11"]          # kai sim / kai explain flags besides -f (optional)
    explain:
      - target: [podgroup, default/trainer]   # kai explain KIND TARGET
        phase: Pending
        reason: GangDoesNotFit               # the dominant reason token (null when it runs)
        evidence: {placed: 3}                # these keys of the evidence, with these values
        otherReasons: [QueuedBehind]         # the other tokens, in order
        suggestions: [reduce minMember to 3] # the changes, in order
        position: {inQueue: 1, ahead: []}    # inQueue, and the PodGroups ahead (null: no position);
                                             # queue, afterFix: the queue a fix would move it to
        estimatedStart: null
        estimate: none: it does not start unless something changes
        estimateAfterFix: null               # the fix the estimate assumes made now (its change)
        text: |                              # the whole text output (golden), optional
          ...

Only the keys listed are checked. Every suggestion is then applied as its merge patches say to the
documents of `manifests.yaml`, and `kai sim` runs the patched input with the same flags: the
PodGroup must then run. A waiting PodGroup's condition, its pods' messages and its last event in
`kai sim -o json` must say what `kai explain` says.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import yaml
from click.testing import CliRunner

from kai.cli.main import main
from kai.explain.patches import apply_merge_patch

NAMESPACED_DEFAULT = "default"


def kai(args: list[str]) -> str:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def explain(case: pathlib.Path, target: list[str], flags: list[str], fmt: str) -> str:
    return kai(["explain", *target, "-f", str(case / "manifests.yaml"), *flags, "-o", fmt])


def diff(doc: dict[str, Any], want: dict[str, Any]) -> list[str]:
    problems = []
    for key in ("phase", "reason", "estimatedStart", "estimate", "estimateAfterFix", "message"):
        if key in want and doc[key] != want[key]:
            problems.append(f"{key}: {doc[key]!r} (want {want[key]!r})")
    for key, value in (want.get("evidence") or {}).items():
        if doc["evidence"].get(key) != value:
            problems.append(f"evidence.{key}: {doc['evidence'].get(key)!r} (want {value!r})")
    if "otherReasons" in want:
        got = [r["reason"] for r in doc["otherReasons"]]
        if got != want["otherReasons"]:
            problems.append(f"otherReasons: {got} (want {want['otherReasons']})")
    if "suggestions" in want:
        got = [s["change"] for s in doc["suggestions"]]
        if got != want["suggestions"]:
            problems.append(f"suggestions: {got} (want {want['suggestions']})")
    if "position" in want:
        position, wanted = doc["position"], want["position"]
        if wanted is None or position is None:
            if wanted != position:
                problems.append(f"position: {position} (want {wanted})")
        else:
            if "inQueue" in wanted and position["inQueue"] != wanted["inQueue"]:
                problems.append(f"position.inQueue: {position['inQueue']} (want {wanted['inQueue']})")
            if "ahead" in wanted and [a["podGroup"] for a in position["ahead"]] != wanted["ahead"]:
                problems.append(f"position.ahead: {position['ahead']} (want {wanted['ahead']})")
            for key in ("queue", "afterFix"):  # where a fix would move a job with no usable queue
                if key in wanted and position.get(key) != wanted[key]:
                    problems.append(f"position.{key}: {position.get(key)!r} (want {wanted[key]!r})")
    return problems


def _matches(document: dict[str, Any], patch: dict[str, Any]) -> bool:
    meta = document.get("metadata") or {}
    namespace = patch["namespace"]
    return (
        document.get("apiVersion") == patch["apiVersion"]
        and document.get("kind") == patch["kind"]
        and meta.get("name") == patch["name"]
        and (namespace is None or (meta.get("namespace") or NAMESPACED_DEFAULT) == namespace)
    )


def patched_manifests(case: pathlib.Path, patches: list[dict[str, Any]]) -> str:
    """The case's documents with the merge patches applied; every patch must find its document (a
    null patch deletes it: RFC 7386 makes the result null)."""
    documents = [d for d in yaml.safe_load_all((case / "manifests.yaml").read_text()) if d]
    for patch in patches:
        hits = [i for i, d in enumerate(documents) if d is not None and _matches(d, patch)]
        assert len(hits) == 1, f"patch for {patch['kind']} {patch['name']} matches {len(hits)} documents"
        documents[hits[0]] = apply_merge_patch(documents[hits[0]], patch["mergePatch"])
    return yaml.safe_dump_all([d for d in documents if d is not None], sort_keys=False)


def runs_after(
    case: pathlib.Path, doc: dict[str, Any], suggestion: dict[str, Any], flags: list[str], tmp: pathlib.Path
) -> bool:
    """Apply the suggestion's patches to the input, run kai sim with the same flags: does the group run?"""
    path = tmp / "patched.yaml"
    path.write_text(patched_manifests(case, suggestion["patches"]))
    out = json.loads(kai(["sim", "-f", str(path), *flags, "-o", "json"]))
    if doc["podGroup"] is None:  # a pod kai did not schedule: do the pods of its workload run now?
        kind, workload = doc["workload"].split("/", 1)
        pods = [p for p in out["pods"] if p["namespace"] == doc["namespace"] and _made_by(p, kind, workload)]
        return bool(pods) and all(p["phase"] == "Running" for p in pods)
    name = doc["podGroup"]
    if any(p["mergePatch"] is None for p in suggestion["patches"]):
        # an object deleted from the input shifts the simulator's uids, which name derived PodGroups:
        # find the workload's PodGroup through its pods' top owner
        kind, workload = doc["workload"].split("/", 1)
        name = next(
            (p["podGroup"] for p in out["pods"] if p["namespace"] == doc["namespace"] and _made_by(p, kind, workload)),
            name,
        )
    group = next((g for g in out["podGroups"] if g["namespace"] == doc["namespace"] and g["name"] == name), None)
    assert group is not None, f"PodGroup {doc['namespace']}/{doc['podGroup']} is gone after {suggestion['change']}"
    return bool(group["phase"] == "Running")


def _made_by(pod: dict[str, Any], kind: str, workload: str) -> bool:
    """Is the pod (kai sim's JSON) made by the workload (itself, for a bare pod)?"""
    return bool((pod["owner"] or {"kind": "Pod", "name": pod["name"]}) == {"kind": kind, "name": workload})


def sim_words(case: pathlib.Path, doc: dict[str, Any], flags: list[str]) -> list[str]:
    """What kai sim says of the PodGroup: its condition, its waiting pods' messages, its last Warning event."""
    out = json.loads(kai(["sim", "-f", str(case / "manifests.yaml"), *flags, "-o", "json"]))
    key = f"{doc['namespace']}/{doc['podGroup']}"
    [group] = [g for g in out["podGroups"] if f"{g['namespace']}/{g['name']}" == key]
    said = [c["message"] for c in group["conditions"]]
    said += sorted({p["message"] for p in out["pods"] if p["podGroup"] == doc["podGroup"] and p["phase"] == "Pending"})
    events = [e["message"] for e in out["events"] if e["object"] == f"PodGroup/{key}" and e["type"] == "Warning"]
    return said + events[-1:]
