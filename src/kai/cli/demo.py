"""`kai demo`: the seeds' story on the embedded cluster, scene by scene, with what a person wants to see."""

from __future__ import annotations

from importlib import resources

from rich.console import Console
from rich.rule import Rule

from kai.api.manifest import parse_document, split_documents
from kai.cli.tables import pending_reasons, pods_table, queues_table
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation

SCENES = (
    ("01-gang.yaml", "A training gang starts all at once"),
    ("02-gang-waits.yaml", "A gang that cannot fit whole waits whole"),
    ("03-fair-share.yaml", "Two teams share the cluster by fair share"),
)


def scene_objects(name: str) -> list[tuple[object, dict[str, object]]]:
    text = resources.files("kai.cli").joinpath("scenes", name).read_text(encoding="utf-8")
    out: list[tuple[object, dict[str, object]]] = []
    for doc in split_documents(text, file=f"scenes/{name}"):
        out.append((parse_document(doc), dict(doc.raw)))
    return out


def scene_comment(name: str) -> str:
    text = resources.files("kai.cli").joinpath("scenes", name).read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").rstrip())
    return " ".join(lines)


def run_demo(console: Console) -> None:
    console.print("[bold]kai demo[/bold]: the embedded cluster has 4 nodes x 8 GPUs (node-0 .. node-3).")
    for number, (name, title) in enumerate(SCENES, start=1):
        console.print(Rule(f"Scene {number}: {title}"))
        console.print(scene_comment(name), highlight=False)
        objects = scene_objects(name)
        sim = Simulation(objects, config=SchedulerConfig(actions=("allocate",)))  # type: ignore[arg-type]
        sim.run(cycles=None, until_idle=True, max_time=3600.0)
        doc = output.build(sim)
        doc["queues"] = [q for q in doc["queues"] if not q["name"].startswith("default")]
        console.print(pods_table(doc))
        for line in pending_reasons(doc):
            console.print(f"  waiting: {line}", highlight=False)
        console.print(queues_table(doc))
