"""`kai demo`: the command that tells the scheduler's story on the embedded cluster."""

from __future__ import annotations

import sys

import click
from rich.console import Console


@click.command()
def demo() -> None:
    """Walk through gang scheduling and fair share on the embedded cluster (no cluster needed)."""
    from kai.cli.demo import run_demo

    run_demo(Console(width=None if sys.stdout.isatty() else 140))
