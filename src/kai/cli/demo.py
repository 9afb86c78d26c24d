"""`kai demo`: the scheduler's story on the embedded cluster, scene by scene.

Scenes are the YAML files in `kai/cli/scenes/`, in file-name order. A scene's comment header
holds its title (first line), its narration (the following lines) and, on a line starting with
`$ `, the `kai sim` command that shows it. The demo runs exactly that command on the scene's
file, so what it prints is what a user gets after `kai demo --export DIR` and running the same
command in DIR.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from kai.cli.sim_cmd import sim
from kai.cli.views import layout

INTRO = (
    "kai demo: the scheduler on its embedded cluster of 4 nodes (node-0 .. node-3), each with 8 "
    "NVIDIA A100 GPUs. Every scene shows the kai sim command that reproduces it; "
    "kai demo --export DIR writes the scenes' YAML so you can change them and run them again."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Scene:
    number: int
    file: str
    title: str
    narration: str
    command: str  # the `kai sim ...` command line, with the scene's file name after -f
    text: str

    @property
    def slug(self) -> str:
        """The name without its number and extension (`build-preempts-train`)."""
        return self.file.split("-", 1)[1].removesuffix(".yaml")


def _entries() -> list[Traversable]:
    folder = resources.files("kai.cli").joinpath("scenes")
    return sorted((e for e in folder.iterdir() if e.name.endswith(".yaml")), key=lambda e: e.name)


def load_scenes() -> list[Scene]:
    scenes = []
    for number, entry in enumerate(_entries(), start=1):
        text = entry.read_text(encoding="utf-8")
        header = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            header.append(line[1:].strip())
        commands = [h[2:] for h in header if h.startswith("$ ")]
        prose = [h for h in header if not h.startswith("$ ")]
        assert commands and prose, f"scene {entry.name} needs a title, a narration and a `# $ kai sim` line"
        scenes.append(
            Scene(
                number=number,
                file=entry.name,
                title=prose[0],
                narration=" ".join(prose[1:]),
                command=commands[0],
                text=text,
            )
        )
    return scenes


def find(scenes: list[Scene], wanted: str) -> Scene | None:
    """A scene by number (`4`), slug (`build-preempts-train`) or file name."""
    for scene in scenes:
        if wanted in (str(scene.number), scene.slug, scene.file, scene.file.removesuffix(".yaml")):
            return scene
    return None


def sim_args(scene: Scene, path: Path) -> list[str]:
    """The scene's command line as arguments of `kai sim`, its file replaced by `path`."""
    words = shlex.split(scene.command)
    assert words[:2] == ["kai", "sim"], f"scene {scene.file}: the command must start with `kai sim`"
    return [str(path) if word == scene.file else word for word in words[2:]]


def play(scene: Scene, console: Console) -> None:
    console.print(Rule(f"Scene {scene.number}: {scene.title}"))
    layout.emit(console, Text(scene.narration))
    console.print()
    console.print(f"$ {scene.command}", style="bold", highlight=False, soft_wrap=True)
    console.print()
    entry = resources.files("kai.cli").joinpath("scenes", scene.file)
    with resources.as_file(entry) as path:
        sim.main(args=sim_args(scene, path), prog_name="kai sim", standalone_mode=False)


def run_demo(console: Console, scenes: list[Scene], *, intro: bool) -> None:
    if intro:
        layout.emit(console, Text(INTRO))
        console.print()
    for scene in scenes:
        play(scene, console)


def list_scenes(console: Console) -> None:
    for scene in load_scenes():
        console.print(f"{scene.number}  {scene.slug:<24} {scene.title}", highlight=False, soft_wrap=True)


def export(directory: Path) -> list[tuple[Scene, Path]]:
    """Write every scene's YAML, unchanged, into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for scene in load_scenes():
        target = directory / scene.file
        target.write_text(scene.text, encoding="utf-8")
        written.append((scene, target))
    return written
