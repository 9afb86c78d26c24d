"""`kai explain` scenario tables: reason, evidence, suggestions, position and estimate per case, the
golden text of the common cases, and every suggestion applied to the input and run with `kai sim`; a
waiting PodGroup's message is the same in its condition, pods, events and the podgroups table."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from tests.explain.explain_check import diff, explain, kai, runs_after, sim_words

CASES = sorted(p for p in (pathlib.Path(__file__).parent / "cases").iterdir() if (p / "expect.yaml").exists())


def _items() -> list[tuple[pathlib.Path, dict[str, Any], list[str]]]:
    items = []
    for case in CASES:
        expect = yaml.safe_load((case / "expect.yaml").read_text())
        for want in expect["explain"]:
            items.append((case, want, [str(f) for f in expect.get("flags") or []]))
    return items


ITEMS = _items()
IDS = [f"{case.name}:{'/'.join(want['target'])}" for case, want, _ in ITEMS]


@pytest.mark.parametrize(("case", "want", "flags"), ITEMS, ids=IDS)
def test_explain(case: pathlib.Path, want: dict[str, Any], flags: list[str], tmp_path: pathlib.Path) -> None:
    doc = json.loads(explain(case, want["target"], flags, "json"))
    assert diff(doc, want) == []
    for suggestion in doc["suggestions"]:
        assert suggestion["verified"] is True
        assert runs_after(case, doc, suggestion, flags, tmp_path), f"{suggestion['change']} does not make it run"
    if "text" in want:
        assert explain(case, want["target"], flags, "text") == want["text"]
    if doc["kind"] == "PodGroup" and doc["phase"] == "Pending":
        assert set(sim_words(case, doc, flags)) == {doc["message"]}
        table = kai(["sim", "-f", str(case / "manifests.yaml"), *flags, "--show", "podgroups"])
        assert " ".join(doc["message"].split()) in " ".join(table.split())


def test_same_input_same_output() -> None:
    case, want, flags = ITEMS[0]
    assert explain(case, want["target"], flags, "json") == explain(case, want["target"], flags, "json")
