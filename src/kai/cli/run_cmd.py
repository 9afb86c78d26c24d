"""`kai run`: schedule a real cluster, exactly as `kai sim` decides (see the run contract).

Flags follow the contract; the scheduler configuration file is the one `kai sim --config` reads.
Exit status: 0 after a clean stop (SIGTERM), 2 for unusable flags, configuration, credentials or a
cluster without the KAI CRDs, 1 for an internal error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time

import click

from kai.api.errors import InputError
from kai.cluster.config import load_config
from kai.core.session import SchedulerConfig
from kai.kubernetes.kubeconfig import KubeConfigError
from kai.kubernetes.serve import RunOptions, StartupError, serve


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _configure_logging(fmt: str, verbosity: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity < 4 else logging.DEBUG
    logging.basicConfig(level=level, handlers=[handler], force=True)


@click.command(name="run")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Kubeconfig to use (default: $KUBECONFIG, then the in-cluster service account).",
)
@click.option("--context", default=None, metavar="NAME", help="Kubeconfig context to use.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Scheduler configuration YAML (the same file as kai sim --config).",
)
@click.option(
    "--scheduler-name",
    default="kai-scheduler",
    show_default=True,
    metavar="NAME",
    help="Schedule the pods whose spec.schedulerName is this.",
)
@click.option(
    "--leader-elect/--no-leader-elect",
    default=True,
    show_default=True,
    help="Hold a Lease so only one replica writes (off: a single replica, or tests).",
)
@click.option(
    "--leader-election-namespace",
    default="kai-scheduler",
    show_default=True,
    metavar="NS",
    help="Namespace of the leader-election Lease.",
)
@click.option(
    "--leader-election-id",
    default="kai-scheduler",
    show_default=True,
    metavar="NAME",
    help="Name of the leader-election Lease.",
)
@click.option(
    "--metrics-bind-address",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="Where /metrics is served (Prometheus text).",
)
@click.option(
    "--health-probe-bind-address",
    default="127.0.0.1:8081",
    show_default=True,
    metavar="HOST:PORT",
    help="Where /healthz and /readyz are served.",
)
@click.option(
    "--kube-api-qps",
    type=click.FloatRange(min=0, min_open=True),
    default=50.0,
    show_default=True,
    help="Sustained requests per second to the API server.",
)
@click.option(
    "--kube-api-burst",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Requests allowed in a burst above the QPS.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log line format on standard error.",
)
@click.option(
    "-v",
    "verbosity",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Log verbosity: 0 warnings, 1-3 info, 4 and above debug.",
)
def run(
    kubeconfig: str | None,
    context: str | None,
    config_path: str | None,
    scheduler_name: str,
    leader_elect: bool,
    leader_election_namespace: str,
    leader_election_id: str,
    metrics_bind_address: str,
    health_probe_bind_address: str,
    kube_api_qps: float,
    kube_api_burst: int,
    log_format: str,
    verbosity: int,
) -> None:
    """Schedule the pods of a real cluster, exactly as kai sim decides them.

    \b
    Examples:
      kai run --kubeconfig ~/.kube/config --no-leader-elect
      kai run --config scheduler.yaml -v 2 --log-format json
    """
    _configure_logging(log_format, verbosity)
    try:
        config = load_config(config_path) if config_path else SchedulerConfig()
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    for flag, address in (
        ("--metrics-bind-address", metrics_bind_address),
        ("--health-probe-bind-address", health_probe_bind_address),
    ):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            click.echo(f"error: {flag}: must be HOST:PORT, got {address!r}", err=True)
            sys.exit(2)
    options = RunOptions(
        kubeconfig=kubeconfig,
        context=context,
        config=config,
        scheduler_name=scheduler_name,
        leader_elect=leader_elect,
        leader_election_namespace=leader_election_namespace,
        leader_election_id=leader_election_id,
        metrics_address=metrics_bind_address,
        health_address=health_probe_bind_address,
        qps=kube_api_qps,
        burst=kube_api_burst,
    )
    try:
        status = asyncio.run(serve(options))
    except (KubeConfigError, StartupError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    sys.exit(status)
