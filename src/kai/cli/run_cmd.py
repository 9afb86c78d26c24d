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
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kai.cluster.reservation_names import RESERVATION_APP, RESERVATION_NAMESPACE
from kai.kubernetes.kubeconfig import KubeConfigError
from kai.kubernetes.leader import LeaseConfig
from kai.kubernetes.options import (
    DEFAULT_HOST,
    DEFAULT_IMAGE,
    ReservationSettings,
    RunOptions,
    WebhookOptions,
    WebhookSettings,
)
from kai.kubernetes.serve import StartupError, serve

if TYPE_CHECKING:
    from kai.core.session import SchedulerConfig


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


def _webhook_options(
    enabled: bool,
    *,
    address: str,
    cert_dir: str | None,
    secret: str,
    hosts: tuple[str, ...],
    configuration: str,
    settings: WebhookSettings,
) -> WebhookOptions | None:
    if not enabled:
        return None
    namespace, _, name = secret.partition("/")
    if not namespace or not name:
        click.echo(f"error: --webhook-secret: must be NAMESPACE/NAME, got {secret!r}", err=True)
        sys.exit(2)
    return WebhookOptions(
        settings=settings,
        address=address,
        cert_dir=Path(cert_dir) if cert_dir else None,
        secret_namespace=namespace,
        secret_name=name,
        hosts=hosts or (DEFAULT_HOST,),
        configuration=configuration,
    )


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
    "--leader-elect-lease-duration",
    type=click.FloatRange(min=0, min_open=True),
    default=15.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a replica waits after the leader's last renewal before it takes the Lease.",
)
@click.option(
    "--leader-elect-renew-deadline",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long the leader keeps trying to renew before it stops scheduling (less than the lease duration).",
)
@click.option(
    "--leader-elect-retry-period",
    type=click.FloatRange(min=0, min_open=True),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="How often replicas try to acquire or renew the Lease.",
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
    "--resource-reservation-namespace",
    default=RESERVATION_NAMESPACE,
    show_default=True,
    metavar="NS",
    help="Namespace of the reservation pods that hold shared GPUs (one per shared device).",
)
@click.option(
    "--resource-reservation-image",
    default=DEFAULT_IMAGE,
    show_default=True,
    metavar="IMAGE",
    help="Image of the reservation pods (the Dockerfile's resource-reservation target).",
)
@click.option(
    "--resource-reservation-service-account",
    default=RESERVATION_APP,
    show_default=True,
    metavar="NAME",
    help="Service account of the reservation pods (they annotate themselves with their device's UUID).",
)
@click.option(
    "--resource-reservation-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=40.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a fractional pod's bind waits for its reservation pod to report the device UUID.",
)
@click.option(
    "--resource-reservation-runtime-class",
    default=None,
    metavar="NAME",
    help="runtimeClassName of the reservation pods (e.g. nvidia). Default: none.",
)
@click.option(
    "--gpu-cdi/--no-gpu-cdi",
    default=False,
    show_default=True,
    help="Name devices in NVIDIA_VISIBLE_DEVICES as CDI devices (the device plugin uses CDI).",
)
@click.option(
    "--webhook/--no-webhook",
    default=False,
    show_default=True,
    help="Serve the admission webhooks (Queues, PodGroups, GPU-sharing pods) over HTTPS.",
)
@click.option(
    "--webhook-bind-address",
    default="0.0.0.0:9443",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the webhooks are served.",
)
@click.option(
    "--webhook-cert-dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    metavar="DIR",
    help="Serve with DIR/tls.crt and DIR/tls.key (e.g. from cert-manager). Default: kai makes its own "
    "certificate, keeps it in --webhook-secret and its CA in --webhook-configuration.",
)
@click.option(
    "--webhook-secret",
    default="kai-scheduler/kai-scheduler-webhook-tls",
    show_default=True,
    metavar="NS/NAME",
    help="Secret that holds kai's own webhook certificate (shared by the replicas).",
)
@click.option(
    "--webhook-host",
    "webhook_hosts",
    multiple=True,
    metavar="NAME",
    help="DNS name or IP address the API server reaches the webhooks by, for kai's own certificate "
    "(repeatable). Default: kai-scheduler-webhook.kai-scheduler.svc.",
)
@click.option(
    "--webhook-configuration",
    default="kai-scheduler",
    show_default=True,
    metavar="NAME",
    help="Validating- and MutatingWebhookConfiguration whose caBundle kai keeps set to its CA.",
)
@click.option(
    "--gpu-sharing/--no-gpu-sharing",
    default=False,
    show_default=True,
    help="Admit pods that ask for part of a GPU (gpu-fraction, gpu-memory); off, the webhook refuses them.",
)
@click.option(
    "--gpu-pod-runtime-class",
    default=None,
    metavar="NAME",
    help="runtimeClassName the webhook gives GPU-sharing pods that set none (e.g. nvidia).",
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
    leader_elect_lease_duration: float,
    leader_elect_renew_deadline: float,
    leader_elect_retry_period: float,
    metrics_bind_address: str,
    health_probe_bind_address: str,
    kube_api_qps: float,
    kube_api_burst: int,
    resource_reservation_namespace: str,
    resource_reservation_image: str,
    resource_reservation_service_account: str,
    resource_reservation_timeout: float,
    resource_reservation_runtime_class: str | None,
    gpu_cdi: bool,
    webhook: bool,
    webhook_bind_address: str,
    webhook_cert_dir: str | None,
    webhook_secret: str,
    webhook_hosts: tuple[str, ...],
    webhook_configuration: str,
    gpu_sharing: bool,
    gpu_pod_runtime_class: str | None,
    log_format: str,
    verbosity: int,
) -> None:
    """Schedule the pods of a real cluster, exactly as kai sim decides them.

    Pods that share a GPU (gpu-fraction, gpu-memory) get their device as KAI's binder gives it: one
    reservation pod per shared device holds the device for the kubelet and reports its UUID, which
    the pod's containers get in NVIDIA_VISIBLE_DEVICES.

    \b
    With --webhook it also serves the admission webhooks: Queues, PodGroups and
    GPU-sharing pods are checked before they are stored (refusals name the field
    or annotation), and GPU-sharing pods get their device settings' env
    references.

    Examples:
      kai run --kubeconfig ~/.kube/config --no-leader-elect
      kai run --config scheduler.yaml -v 2 --log-format json
      kai run --webhook --gpu-sharing --webhook-host kai-scheduler-webhook.kai-scheduler.svc
    """
    _configure_logging(log_format, verbosity)
    config: SchedulerConfig | None = None  # the defaults, made once the scheduling core is imported
    if config_path:
        from kai.api.errors import InputError
        from kai.cluster.config import load_config

        try:
            config = load_config(config_path)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
    for flag, address in (
        ("--metrics-bind-address", metrics_bind_address),
        ("--health-probe-bind-address", health_probe_bind_address),
        ("--webhook-bind-address", webhook_bind_address),
    ):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            click.echo(f"error: {flag}: must be HOST:PORT, got {address!r}", err=True)
            sys.exit(2)
    try:
        LeaseConfig(  # checks the timing as the elector will
            lease_duration=leader_elect_lease_duration,
            renew_deadline=leader_elect_renew_deadline,
            retry_period=leader_elect_retry_period,
        )
    except ValueError as exc:
        click.echo(f"error: --leader-elect-*: {exc}", err=True)
        sys.exit(2)
    options = RunOptions(
        kubeconfig=kubeconfig,
        context=context,
        config=config,
        scheduler_name=scheduler_name,
        leader_elect=leader_elect,
        leader_election_namespace=leader_election_namespace,
        leader_election_id=leader_election_id,
        lease_duration=leader_elect_lease_duration,
        renew_deadline=leader_elect_renew_deadline,
        retry_period=leader_elect_retry_period,
        metrics_address=metrics_bind_address,
        health_address=health_probe_bind_address,
        qps=kube_api_qps,
        burst=kube_api_burst,
        reservations=ReservationSettings(
            namespace=resource_reservation_namespace,
            image=resource_reservation_image,
            service_account=resource_reservation_service_account,
            timeout=resource_reservation_timeout,
            runtime_class=resource_reservation_runtime_class or None,
            cdi=gpu_cdi,
        ),
        webhook=_webhook_options(
            webhook,
            address=webhook_bind_address,
            cert_dir=webhook_cert_dir,
            secret=webhook_secret,
            hosts=webhook_hosts,
            configuration=webhook_configuration,
            settings=WebhookSettings(
                scheduler_name=scheduler_name, gpu_sharing=gpu_sharing, runtime_class=gpu_pod_runtime_class or None
            ),
        ),
    )
    try:
        status = asyncio.run(serve(options))
    except (KubeConfigError, StartupError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    sys.exit(status)
