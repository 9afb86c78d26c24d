"""`kai install`: print what a cluster needs before `kai run` can work there.

    kai install crds | kubectl apply -f -

prints the Queue and PodGroup CRDs (the same files as the Helm chart's ``crds/``).
"""

from __future__ import annotations

import click

from kai.deploy import crds


@click.group()
def install() -> None:
    """Print manifests to install on a cluster (pipe them to kubectl apply -f -)."""


@install.command(
    name="crds",
    epilog="""\b
Examples:
  kai install crds | kubectl apply -f -
  kai install crds > kai-crds.yaml
""",
)
def install_crds() -> None:
    """Print the Queue and PodGroup CRDs as multi-document YAML."""
    click.echo(crds.crd_yaml(), nl=False)
