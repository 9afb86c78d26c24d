"""The settings of `kai run` as plain data: its flags, read before anything heavy is imported.

They live apart from the code that uses them so that importing them costs almost nothing: the
command line is parsed and the first lists are requested before the scheduling core, the metrics
server and the webhooks are imported (`kai.kubernetes.serve` imports those while the lists arrive).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from kai.cluster.reservation_names import RESERVATION_APP, RESERVATION_NAMESPACE

if TYPE_CHECKING:
    from kai.core.session import SchedulerConfig

DEFAULT_IMAGE = "kai-resource-reservation:0.1.0"
DEFAULT_HOST = "kai-scheduler-webhook.kai-scheduler.svc"  # the chart's Service, in the chart's default namespace


class ReservationSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How reservation pods are made (the `--resource-reservation-*` flags of `kai run`)."""

    namespace: str = RESERVATION_NAMESPACE
    image: str = DEFAULT_IMAGE
    service_account: str = RESERVATION_APP
    timeout: float = 40.0  # seconds a bind waits for the device UUID (KAI's default)
    runtime_class: str | None = None
    cdi: bool = False  # NVIDIA_VISIBLE_DEVICES as CDI device names


class WebhookSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the pod webhooks apply (`--scheduler-name`, `--gpu-sharing`, `--gpu-pod-runtime-class`)."""

    scheduler_name: str = "kai-scheduler"
    gpu_sharing: bool = False
    runtime_class: str | None = None


class WebhookOptions(msgspec.Struct, frozen=True, kw_only=True):
    """`kai run --webhook` and its `--webhook-*` flags."""

    settings: WebhookSettings
    address: str = "0.0.0.0:9443"
    cert_dir: Path | None = None  # the user's tls.crt and tls.key; None: kai makes and keeps its own
    secret_namespace: str = "kai-scheduler"
    secret_name: str = "kai-scheduler-webhook-tls"
    hosts: tuple[str, ...] = (DEFAULT_HOST,)
    configuration: str = "kai-scheduler"


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    kubeconfig: str | None
    context: str | None
    config: SchedulerConfig | None = None  # None: the defaults (`SchedulerConfig()`)
    scheduler_name: str = "kai-scheduler"
    leader_elect: bool = True
    leader_election_namespace: str = "kai-scheduler"
    leader_election_id: str = "kai-scheduler"
    lease_duration: float = 15.0  # seconds, as client-go's leader election
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_address: str = "127.0.0.1:8080"
    health_address: str = "127.0.0.1:8081"
    qps: float = 50.0
    burst: int = 300
    reservations: ReservationSettings = msgspec.field(default_factory=ReservationSettings)
    webhook: WebhookOptions | None = None  # serve the admission webhooks (`--webhook`)
