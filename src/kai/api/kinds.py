"""Which kinds of object kai reads, which it skips, and which are mistakes, the way the API server tells them.

`kubectl apply` refuses a kind the API server does not serve ("no matches for kind") and applies every
kind it serves. kai mirrors that: a kind it reads is parsed; a real kind that has nothing to do with
scheduling (a Service, a Secret, a DaemonSet, a Prometheus ServiceMonitor) is skipped and listed; a kind
the API server cannot serve is an error. The API server's built-in groups are fully known (their kinds
come from the pinned Kubernetes models), so an unknown kind in one of them is refused, with a
did-you-mean; a kind in a group kai cannot know (a CRD) is refused only when its name is a near miss of
a kind kai reads (`Queu`, `RayClustr`), and skipped otherwise.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
from collections.abc import Mapping

import msgspec

# (group, kind) kai parses -> the versions that serve it; None: any version (a third-party CRD whose
# versions kai does not track).
READ_KINDS: Mapping[tuple[str, str], tuple[str, ...] | None] = {
    ("", "Pod"): ("v1",),
    ("", "Node"): ("v1",),
    ("", "Namespace"): ("v1",),
    ("", "ConfigMap"): ("v1",),
    ("scheduling.k8s.io", "PriorityClass"): ("v1",),
    ("scheduling.run.ai", "Queue"): ("v2",),
    ("scheduling.run.ai", "PodGroup"): ("v2alpha2",),
    ("apps", "Deployment"): ("v1",),
    ("apps", "ReplicaSet"): ("v1",),
    ("apps", "StatefulSet"): ("v1",),
    ("batch", "Job"): ("v1",),
    ("batch", "CronJob"): ("v1",),
    ("ray.io", "RayCluster"): None,
    ("ray.io", "RayJob"): None,
    ("ray.io", "RayService"): None,
    ("kubeflow.org", "PyTorchJob"): None,
    ("kubeflow.org", "TFJob"): None,
    ("kubeflow.org", "MPIJob"): None,
    ("kubeflow.org", "XGBoostJob"): None,
    ("kubeflow.org", "JAXJob"): None,
    ("kubeflow.org", "Notebook"): None,
    ("jobset.x-k8s.io", "JobSet"): None,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): None,
}

# KAI's own kinds that kai does not read (they are written by KAI's components, not by users).
_KAI_OTHER_KINDS: Mapping[str, frozenset[str]] = {
    "scheduling.run.ai": frozenset({"BindRequest"}),
    "kai.scheduler": frozenset({"Config", "SchedulingShard", "Topology"}),
}


class KindVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """What to do with one (apiVersion, kind): read it, skip it (saying why), or refuse it (saying why)."""

    action: str  # "read" | "skip" | "refuse"
    field: str = ""  # the field the refusal is about: "kind" or "apiVersion"
    reason: str = ""


def group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def version_of(api_version: str) -> str:
    return api_version.split("/", 1)[1] if "/" in api_version else api_version


@functools.cache
def _builtin_kinds() -> dict[str, frozenset[str]]:
    """Every kind the Kubernetes API server serves, by group, from the pinned lightkube resource models."""
    import lightkube.resources as resources  # deferred: only an unknown kind needs the whole catalogue

    kinds: dict[str, set[str]] = {}
    for module_info in pkgutil.iter_modules(resources.__path__):
        module = importlib.import_module(f"{resources.__name__}.{module_info.name}")
        for value in vars(module).values():
            info = getattr(value, "_api_info", None)
            resource = getattr(info, "resource", None)
            if resource is not None and resource.kind:
                kinds.setdefault(resource.group, set()).add(resource.kind)
    return {group: frozenset(names) for group, names in kinds.items()}


def _kinds_in(group: str) -> frozenset[str] | None:
    """The kinds served in `group` when kai knows them all; None for a group kai cannot know (a CRD)."""
    known = {kind for g, kind in READ_KINDS if g == group}
    if group in _KAI_OTHER_KINDS:
        return frozenset(known | _KAI_OTHER_KINDS[group])
    builtin = _builtin_kinds().get(group)
    if builtin is not None:
        return frozenset(known | builtin)
    return None


def _near(word: str, candidates: frozenset[str] | set[str]) -> str | None:
    lowered = {c.lower(): c for c in candidates}
    if word.lower() in lowered:
        return lowered[word.lower()]
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.8)
    return lowered[match[0]] if match else None


def classify(api_version: str, kind: str) -> KindVerdict:
    """Read, skip or refuse an object of this apiVersion and kind (see the module docstring)."""
    group = group_of(api_version)
    if (group, kind) in READ_KINDS:
        versions = READ_KINDS[(group, kind)]
        if versions is not None and version_of(api_version) not in versions:
            return KindVerdict(
                action="refuse",
                field="apiVersion",
                reason=f'no {kind} is served in "{api_version}"; use {_homes(kind)}',
            )
        return KindVerdict(action="read")
    served = _kinds_in(group)
    ours = {k for _, k in READ_KINDS}
    if served is not None and kind in served:
        return KindVerdict(action="skip", reason="kai does not read this kind; it plays no part in scheduling")
    if served is not None and kind in ours:
        return KindVerdict(
            action="refuse", field="apiVersion", reason=f'no {kind} is served in "{api_version}"; use {_homes(kind)}'
        )
    if served is not None:
        guess = _near(kind, served) or _near(kind, ours)
        hint = f"; did you mean {guess}?" if guess else ""
        where = f'group "{group}"' if group else "the core group (apiVersion v1)"
        return KindVerdict(action="refuse", field="kind", reason=f'no kind "{kind}" is served in {where}{hint}')
    guess = _near(kind, ours)
    if guess is not None and guess != kind:
        return KindVerdict(
            action="refuse", field="kind", reason=f'unknown kind "{kind}"; did you mean {guess} ({_homes(guess)})?'
        )
    if guess == kind:
        return KindVerdict(
            action="skip", reason=f"not the {kind} kai reads (that one is {_homes(kind)}); kai does not read this kind"
        )
    return KindVerdict(action="skip", reason="a kind kai does not know (a custom resource?); kai does not read it")


def _homes(kind: str) -> str:
    """Where kai reads `kind`: `apiVersion: scheduling.run.ai/v2`, or the group for third-party kinds."""
    homes = []
    for (group, name), versions in sorted(READ_KINDS.items()):
        if name != kind:
            continue
        if versions is None:
            homes.append(f"apiVersion: {group}/<version>")
        else:
            homes.extend(f"apiVersion: {group}/{v}" if group else f"apiVersion: {v}" for v in versions)
    return " or ".join(homes)
