"""A waiting PodGroup's Warning event is recorded when its reason changes, not each time its numbers
do: the condition follows the numbers, the event stays the one of the reason. A gang of four 8-GPU
pods waits on the embedded cluster while three pods end, at 30 s and at 60 s."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from tests.explain.explain_check import kai

STORY = pathlib.Path(__file__).parent / "events" / "gang-waits-for-three-pods.yaml"
KEY = "PodGroup/default/wide"


def at(max_time: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = json.loads(kai(["sim", "-f", str(STORY), "--until-idle", "--max-time", max_time, "-o", "json"]))
    [group] = [g for g in out["podGroups"] if g["name"] == "wide"]
    return group, [e for e in out["events"] if e["object"] == KEY and e["type"] == "Warning"]


def test_the_event_says_the_reason_once_while_the_condition_follows_the_numbers() -> None:
    group, events = at("2s")
    [said] = group["conditions"]
    assert "1 of 4 placed" in said["message"]
    assert [e["message"] for e in events] == [said["message"]]

    group, events = at("45s")
    [now] = group["conditions"]
    assert "3 of 4 placed" in now["message"] and now["reason"] == said["reason"]
    assert [e["message"] for e in events] == [said["message"]], "the same reason in other numbers: no new event"

    group, events = at("24h")
    assert group["phase"] == "Running" and group["conditions"] == []
    assert len(events) == 1
