"""The long help of `kai sim`: what a user needs without opening the README.

Kept apart from the command so the option code stays short; the config keys come from
`kai.cluster.config.KEY_HELP`, the one place they are defined.
"""

from __future__ import annotations

import click

from kai.cluster.config import KEY_HELP
from kai.sim import defaults

EPILOG = f"""\b
Examples:
  kai sim -f queues.yaml -f training.yaml --until-idle
  kai sim -f priority.yaml --until-idle --timeline --at 31s
  kai sim -f manifests/ --until-idle -o wide --show pods,nodes
  kai sim -f manifests/ --until-idle -o json > result.json

\b
The embedded cluster (used when the input has no Node):
  node-0 .. node-3, each with 8 NVIDIA-A100-SXM4-80GB GPUs (81920 MiB),
  64 CPUs and 512Gi of memory. The priority classes train (50),
  build-preemptible (75), build (100) and inference (125), and the queues
  {defaults.DEFAULT_PARENT_QUEUE} and its child {defaults.DEFAULT_QUEUE}, exist unless
  the input defines them. Only pods with schedulerName: kai-scheduler are
  scheduled; other pods on a node count as foreign usage. The clock starts
  at --start-time, else at the latest creationTimestamp in the input, else
  at {defaults.DEFAULT_START}.

\b
Simulation-only annotations:
  sim.kai.scheduler/create-at: 30s  on any object: it is created 30s after
                                    the start (a build pod that arrives
                                    while a train pod runs)
  sim.kai.scheduler/duration: 90s   on a pod or pod template: it succeeds
                                    90s after it starts (else it runs
                                    until evicted)
  An evicted pod is Terminating for its terminationGracePeriodSeconds
  (default 30s); controllers (Deployment, Job, RayCluster, ...) then
  recreate their pods. A CronJob creates a Job each time its schedule
  fires on the virtual clock, so --until-idle runs it until --max-time.

\b
Tables (-o table or -o wide), chosen with --show:
  pods       GPU is the request as written (1, 0.5, 2x0.5, 20000Mi),
             GPU-GROUP the shared device (whole in -o wide)
  podgroups  each gang: queue, priority, minMember, running, pending, why
  queues     as kubectl get queues, then quota, limit, fair share,
             allocated and requested: gpu in devices, cpu in cores,
             memory in bytes; - is unlimited
  nodes      GPUs used and free, and the share in use of each device
  evictions  when, which action, for whom, and why
  --timeline prints every event in virtual time, --at the tables at a time.
  -o json prints the sim contract's document (same input, same bytes).

\b
Exit status: 0 success; 2 unusable input (each problem names the file,
the document, the object and the field); 1 internal error.
The --config file's keys: kai sim --help-config.
"""


def print_config_help(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The eager `--help-config` option: print every key of the --config file and exit."""
    if not value or ctx.resilient_parsing:
        return
    click.echo("Keys of the kai sim --config file (YAML), with their defaults; unknown keys are errors:\n")
    width = max(len(key) for key in KEY_HELP)
    for key, (example, meaning) in KEY_HELP.items():
        click.echo(f"  {key + ':':<{width + 1}} {example}")
        click.echo(f"  {'':<{width + 1}} {meaning}")
    ctx.exit()
