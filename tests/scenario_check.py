"""Runs one scenario case (manifests.yaml + expect.yaml) through `kai sim -o json` and diffs the result.

The expect.yaml format is the one of the shared `check-sim-cases` tool: pods (phase, node,
nominatedNode, gpuGroupSameAs, anyOf), podGroups (conditionReason), queues (fairShare, and here
also allocated).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import yaml
from click.testing import CliRunner

from kai.cli.main import main

POD_FIELDS = ("phase", "node", "nominatedNode")


def run_sim(case: pathlib.Path, expect: dict[str, Any], tmp: pathlib.Path) -> dict[str, Any]:
    args = ["sim", "-f", str(case / "manifests.yaml"), "--cycles", str(int(expect.get("cycles", 1)))]
    if expect.get("actions"):
        args += ["--actions", ",".join(expect["actions"])]
    if expect.get("config") is not None:
        config = tmp / "config.yaml"
        config.write_text(yaml.safe_dump(expect["config"]))
        args += ["--config", str(config)]
    args += ["-o", "json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def diff(out: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    pods = {f"{p['namespace']}/{p['name']}": p for p in out["pods"]}
    for key, want in (expect.get("pods") or {}).items():
        key = key if "/" in key else f"default/{key}"
        got = pods.get(key)
        if got is None:
            problems.append(f"{key}: missing")
            continue
        for field in POD_FIELDS:
            if field in want and got.get(field) != want[field]:
                problems.append(f"{key}: {field} {got.get(field)} (want {want[field]})")
        if "anyOf" in want and not any(all(got.get(f) == alt[f] for f in alt) for alt in want["anyOf"]):
            problems.append(f"{key}: matches none of {want['anyOf']}")
        other = want.get("gpuGroupSameAs")
        if other:
            theirs = pods.get(other if "/" in other else f"default/{other}", {}).get("gpuGroups") or []
            if not got["gpuGroups"] or sorted(got["gpuGroups"]) != sorted(theirs):
                problems.append(f"{key}: gpuGroups {got['gpuGroups']} (want same as {other}: {theirs})")
    groups = {f"{g['namespace']}/{g['name']}": g for g in out["podGroups"]}
    for key, want in (expect.get("podGroups") or {}).items():
        key = key if "/" in key else f"default/{key}"
        group = groups.get(key)
        if group is None:
            problems.append(f"podGroup {key}: missing")
            continue
        reasons = [c["reason"] for c in group["conditions"]]
        if "conditionReason" in want and want["conditionReason"] not in reasons:
            problems.append(f"podGroup {key}: reasons {reasons} (want {want['conditionReason']})")
    queues = {q["name"]: q for q in out["queues"]}
    for name, want in (expect.get("queues") or {}).items():
        queue = queues.get(name)
        if queue is None:
            problems.append(f"queue {name}: missing")
            continue
        for section in ("fairShare", "allocated"):
            for res, value in (want.get(section) or {}).items():
                if abs(queue[section][res] - value) > 1e-6:
                    problems.append(f"queue {name}: {section}.{res} {queue[section][res]} (want {value})")
    return problems
