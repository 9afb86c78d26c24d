"""`kai demo`: the command that tells the scheduler's story on the embedded cluster."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from kai.cli import CONTEXT_SETTINGS

DEMO_EPILOG = """\b
Examples:
  kai demo                 every scene, one after the other
  kai demo --list          the scenes, numbered and named
  kai demo 4               one scene, by number or by name:
  kai demo build-preempts-train
  kai demo --export DIR    write the scenes' YAML to DIR, to run, change
                           and run again with each scene's kai sim command
"""


@click.command(epilog=DEMO_EPILOG, context_settings=CONTEXT_SETTINGS)
@click.argument("scene", required=False, metavar="[SCENE]")
@click.option("--list", "list_only", is_flag=True, help="List the scenes (number, name, title) and exit.")
@click.option(
    "--export",
    "export_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Write each scene's YAML into DIR (created if needed) and exit.",
)
def demo(scene: str | None, list_only: bool, export_dir: Path | None) -> None:
    """Walk through the scheduler's story on the embedded cluster (no cluster needed).

    Gang scheduling, fair share between teams, a build pod preempting a train pod, inference
    reclaiming GPUs, Ray clusters and GPU sharing, each scene run with `kai sim`. SCENE picks one
    scene by number or name; without it every scene plays.
    """
    from kai.cli import demo as scenes

    console = Console(highlight=False)
    if list_only:
        scenes.list_scenes(console)
        return
    if export_dir is not None:
        click.echo(f"Wrote the scenes to {export_dir}; in that directory, each runs with its command:")
        for exported, path in scenes.export(export_dir):
            click.echo(f"  {path.name}\n    {exported.command}")
        return
    chosen = scenes.load_scenes()
    if scene is not None:
        found = scenes.find(chosen, scene)
        if found is None:
            names = ", ".join(f"{s.number} ({s.slug})" for s in chosen)
            raise click.BadParameter(f'no scene "{scene}"; the scenes are {names}', param_hint="SCENE")
        chosen = [found]
    scenes.run_demo(console, chosen, intro=scene is None)
