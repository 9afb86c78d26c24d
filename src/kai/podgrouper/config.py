"""Settings of the pod grouper and the label keys it reads, with KAI's defaults.

The defaults match a Helm install of KAI: queue label ``kai.scheduler/queue``, fallback queue
``default-queue``, node-pool label ``kai.scheduler/node-pool`` and the four PriorityClasses the
chart creates. Per-kind defaults come from KAI's optional defaults ConfigMap (key ``types``, a JSON
list of ``{typeName, group, priorityName, preemptibility}``); :func:`parse_kind_defaults` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import msgspec

from kai.api import podgroup as api_podgroup
from kai.podgrouper import model

# Labels and annotations read from workloads and pods.
QUEUE_LABEL_KEY = "kai.scheduler/queue"
LEGACY_QUEUE_LABEL_KEY = "runai/queue"
PROJECT_LABEL_KEY = "project"
PRIORITY_LABEL_KEY = "priorityClassName"
PREEMPTIBILITY_LABEL_KEY = "kai.scheduler/preemptibility"
NODE_POOL_LABEL_KEY = "kai.scheduler/node-pool"
USER_LABEL_KEY = "user"
TOP_OWNER_METADATA_ANNOTATION = api_podgroup.TOP_OWNER_METADATA_ANNOTATION
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/topology-required-placement"
TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/topology-preferred-placement"
SEGMENT_SIZE_ANNOTATION = "kai.scheduler/segment-size"
SEGMENT_TOPOLOGY_REQUIRED_ANNOTATION = "kai.scheduler/segment-topology-required-placement"
SEGMENT_TOPOLOGY_PREFERRED_ANNOTATION = "kai.scheduler/segment-topology-preferred-placement"

DEFAULT_QUEUE = "default-queue"
POD_GROUP_NAME_PREFIX = "pg"

# The PriorityClasses KAI's Helm chart installs (name -> value); value < 100 means preemptible.
TRAIN = "train"
BUILD_PREEMPTIBLE = "build-preemptible"
BUILD = "build"
INFERENCE = "inference"
DEFAULT_PRIORITY_CLASSES: Mapping[str, int] = {TRAIN: 50, BUILD_PREEMPTIBLE: 75, BUILD: 100, INFERENCE: 125}

PREEMPTIBILITY_VALUES: tuple[model.Preemptibility, ...] = ("preemptible", "non-preemptible")


class KindDefault(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of KAI's defaults ConfigMap: default priority class and preemptibility of a kind.

    ``group`` empty matches the kind in any API group (KAI looks up ``Kind.group`` first, then
    ``Kind``).
    """

    type_name: str
    group: str = ""
    priority_name: str = ""
    preemptibility: model.Preemptibility | None = None


class GrouperConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Settings of the pod grouper.

    ``priority_classes`` lists the PriorityClasses that exist (name -> value); a resolved name not in
    it is a ``PriorityClassNotFound`` error. None skips the check. ``legacy_queue_label_key`` is the
    pre-v0.6.0 queue label that kai still honours with a deprecation warning; None disables it.
    """

    queue_label_key: str = QUEUE_LABEL_KEY
    default_queue: str = DEFAULT_QUEUE
    priority_classes: Mapping[str, int] | None = msgspec.field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    kind_defaults: tuple[KindDefault, ...] = ()
    node_pool_label_key: str = NODE_POOL_LABEL_KEY
    legacy_queue_label_key: str | None = LEGACY_QUEUE_LABEL_KEY

    def kind_default(self, *, group: str, kind: str) -> KindDefault | None:
        """The defaults-ConfigMap entry for a type: exact ``Kind.group`` first, then a group-less entry.

        When several entries share a key the last one wins, as when KAI loads the JSON into a map.
        """
        exact: KindDefault | None = None
        any_group: KindDefault | None = None
        for entry in self.kind_defaults:
            if entry.type_name != kind:
                continue
            if entry.group == group:
                exact = entry
            if entry.group == "":
                any_group = entry
        return exact if exact is not None else any_group


def parse_kind_defaults(*, text: str) -> tuple[KindDefault, ...]:
    """Parse the ``types`` value of KAI's defaults ConfigMap. Pure, no side effects.

    Raises ValueError with a user-readable message when the JSON is malformed; the caller (the
    adapter or the CLI that loads the ConfigMap) reports it.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"the defaults ConfigMap 'types' value is not valid JSON: {err}") from err
    if not isinstance(raw, list):
        raise ValueError("the defaults ConfigMap 'types' value must be a JSON list of objects")
    entries: list[KindDefault] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ValueError(f"the defaults ConfigMap 'types' entry {index} must be an object")
        type_name = item.get("typeName")
        if not isinstance(type_name, str) or not type_name:
            raise ValueError(f"the defaults ConfigMap 'types' entry {index} needs a typeName")
        preemptibility_text = str(item.get("preemptibility") or "").lower()
        preemptibility: model.Preemptibility | None = None
        if preemptibility_text:
            if preemptibility_text not in PREEMPTIBILITY_VALUES:
                raise ValueError(
                    f"the defaults ConfigMap 'types' entry {index} ({type_name}) has preemptibility "
                    f"{item.get('preemptibility')!r}; use preemptible or non-preemptible"
                )
            preemptibility = "preemptible" if preemptibility_text == "preemptible" else "non-preemptible"
        entries.append(
            KindDefault(
                type_name=type_name,
                group=str(item.get("group") or ""),
                priority_name=str(item.get("priorityName") or ""),
                preemptibility=preemptibility,
            )
        )
    return tuple(entries)
