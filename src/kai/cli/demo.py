"""`kai demo`: the seeds' story on the embedded cluster, scene by scene, with what a person wants to see.

Scenes are the YAML files in `kai/cli/scenes/`, run in file-name order. A scene's first comment
line is its title, the following comment lines its narration. Each scene runs on a fresh
embedded cluster with every action enabled, until nothing more happens (bounded to one hour of
virtual time), and shows pods, why anything waits, evictions and the queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

from rich.console import Console
from rich.rule import Rule

from kai.api.manifest import ApiObject, SkippedObject, parse_document, split_documents
from kai.cli.tables import evictions_table, pending_reasons, pods_table, queues_table
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation

MAX_SCENE_TIME = 3600.0
NOTICES = ("QueueLabelMissing", "DeprecatedQueueLabel")  # warnings a user must see to fix their manifest


@dataclass(frozen=True, kw_only=True, slots=True)
class Scene:
    file: str
    title: str
    narration: str
    objects: list[tuple[ApiObject, dict[str, Any]]]


def load_scenes() -> list[Scene]:
    folder = resources.files("kai.cli").joinpath("scenes")
    scenes = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        text = entry.read_text(encoding="utf-8")
        comments = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            comments.append(line.lstrip("#").strip())
        objects: list[tuple[ApiObject, dict[str, Any]]] = []
        for doc in split_documents(text, file=f"scenes/{entry.name}"):
            parsed = parse_document(doc)
            assert not isinstance(parsed, SkippedObject), f"scene {entry.name} has an unknown kind"
            objects.append((parsed, dict(doc.raw)))
        scenes.append(
            Scene(file=entry.name, title=comments[0] if comments else entry.name,
                  narration=" ".join(comments[1:]), objects=objects)
        )
    return scenes


def run_scene(scene: Scene) -> dict[str, Any]:
    sim = Simulation(scene.objects, config=SchedulerConfig())
    sim.run(cycles=None, until_idle=True, max_time=MAX_SCENE_TIME)
    return output.build(sim)


def run_demo(console: Console) -> None:
    console.print("[bold]kai demo[/bold]: the embedded cluster has 4 nodes x 8 GPUs (node-0 .. node-3).")
    for number, scene in enumerate(load_scenes(), start=1):
        console.print(Rule(f"Scene {number}: {scene.title}"))
        console.print(scene.narration, highlight=False)
        doc = run_scene(scene)
        doc["queues"] = [q for q in doc["queues"] if not q["name"].startswith("default")]
        console.print(pods_table(doc))
        for line in pending_reasons(doc):
            console.print(f"  waiting: {line}", highlight=False)
        seen: set[str] = set()
        for event in doc["events"]:
            if event["type"] == "Warning" and event["reason"] in NOTICES and event["message"] not in seen:
                seen.add(event["message"])
                console.print(f"  notice ({event['reason']}): {event['message']}", highlight=False)
        if doc["evictions"]:
            console.print(evictions_table(doc))
            for event in doc["events"]:
                if event["reason"] == "Evicted":
                    console.print(f"  {event['object']}: {event['message']}", highlight=False)
        console.print(queues_table(doc))
