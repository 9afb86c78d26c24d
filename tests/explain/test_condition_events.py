"""A waiting PodGroup's Warning event is recorded when its reason changes, not each time its numbers
do: the condition follows the numbers, the event stays the one of the reason."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from tests.explain.explain_check import kai

STORIES = pathlib.Path(__file__).parent / "events"


def at(story: str, name: str, max_time: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The PodGroup and its Warning events as `kai sim` shows them `max_time` into the story."""
    path = STORIES / story
    out = json.loads(kai(["sim", "-f", str(path), "--until-idle", "--max-time", max_time, "-o", "json"]))
    [group] = [g for g in out["podGroups"] if g["name"] == name]
    key = f"PodGroup/default/{name}"
    return group, [e for e in out["events"] if e["object"] == key and e["type"] == "Warning"]


def test_the_event_says_the_reason_once_while_the_condition_follows_the_numbers() -> None:
    """A gang of four 8-GPU pods waits on the embedded cluster while three pods end, at 30 s and 60 s."""
    story = "gang-waits-for-three-pods.yaml"
    group, events = at(story, "wide", "2s")
    [said] = group["conditions"]
    assert "1 of 4 placed" in said["message"]
    assert [e["message"] for e in events] == [said["message"]]

    group, events = at(story, "wide", "45s")
    [now] = group["conditions"]
    assert "3 of 4 placed" in now["message"] and now["reason"] == said["reason"]
    assert [e["message"] for e in events] == [said["message"]], "the same reason in other numbers: no new event"

    group, events = at(story, "wide", "24h")
    assert group["phase"] == "Running" and group["conditions"] == []
    assert len(events) == 1


def test_a_new_reason_is_a_new_event() -> None:
    """A gang of two waits for its second pod, then for nodes larger than any there is."""
    group, events = at("gang-completes-but-is-too-large.yaml", "pair", "20s")
    [now] = group["conditions"]
    assert [(e["reason"], e["message"]) for e in events if e["reason"] != "NotReady"] == [
        ("GangIncomplete", "pair cannot start: 2 pods must start together, 1 exists"),
        (now["reason"], now["message"]),
    ]
    assert now["message"].startswith("pod pair-0 of pair asks 12 GPUs; the largest node has 8 GPUs")
