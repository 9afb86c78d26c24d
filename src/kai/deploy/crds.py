"""The CRDs kai needs on a cluster: read them, print them, and say which ones a cluster lacks.

`kai install crds` prints :func:`crd_yaml`; `kai run` checks at startup that every CRD in
:data:`REQUIRED_CRDS` is installed and, when some are not, exits with :func:`missing_crds_message`.
The CRDs are KAI Scheduler's API (group ``scheduling.run.ai``), so a cluster where KAI's own CRDs
are installed already has them.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from typing import Any

import msgspec
import yaml


class RequiredCrd(msgspec.Struct, frozen=True, kw_only=True):
    """One CRD kai reads and writes: its object name and the group/version/plural kai uses."""

    name: str
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    file: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


REQUIRED_CRDS: tuple[RequiredCrd, ...] = (
    RequiredCrd(
        name="podgroups.scheduling.run.ai",
        group="scheduling.run.ai",
        version="v2alpha2",
        plural="podgroups",
        kind="PodGroup",
        namespaced=True,
        file="podgroups.scheduling.run.ai.yaml",
    ),
    RequiredCrd(
        name="queues.scheduling.run.ai",
        group="scheduling.run.ai",
        version="v2",
        plural="queues",
        kind="Queue",
        namespaced=False,
        file="queues.scheduling.run.ai.yaml",
    ),
)
"""Every CRD `kai run` needs, sorted by name."""

REQUIRED_CRD_NAMES: tuple[str, ...] = tuple(crd.name for crd in REQUIRED_CRDS)

INSTALL_HINT = (
    "install them with the Helm chart (helm install kai deploy/helm/kai -n kai-scheduler --create-namespace), "
    "with kubectl apply -f deploy/kai.yaml, or with: kai install crds | kubectl apply -f -"
)


def crd_file_texts() -> tuple[tuple[str, str], ...]:
    """(file name, YAML text) of each CRD file shipped with kai, in :data:`REQUIRED_CRDS` order."""
    folder = resources.files("kai.deploy") / "crds"
    return tuple((crd.file, (folder / crd.file).read_text(encoding="utf-8")) for crd in REQUIRED_CRDS)


def crd_yaml() -> str:
    """All CRDs as one multi-document YAML stream, ready for ``kubectl apply -f -``."""
    return "".join(f"---\n{text.rstrip()}\n" for _, text in crd_file_texts())


def crd_manifests() -> tuple[dict[str, Any], ...]:
    """The CRDs as objects (apiextensions.k8s.io/v1 CustomResourceDefinition), in :data:`REQUIRED_CRDS` order
    (read with libyaml where PyYAML has it: `kai sim` reads them at every start, 0.03 s in pure Python)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(yaml.load(text, Loader=loader) for _, text in crd_file_texts())


def missing_crds(installed: Iterable[str]) -> tuple[str, ...]:
    """The names of the required CRDs that are not among ``installed`` (CRD object names), sorted."""
    have = set(installed)
    return tuple(name for name in REQUIRED_CRD_NAMES if name not in have)


def missing_crds_message(missing: Iterable[str]) -> str:
    """The error `kai run` gives for a cluster that lacks CRDs: which ones, and how to install them."""
    names = ", ".join(sorted(missing))
    return f"the cluster has no CustomResourceDefinition {names}; {INSTALL_HINT}"
