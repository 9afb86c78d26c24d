"""Object metadata shared by every kind: name, namespace, labels, owners, creation time.

Metadata and owner references are frozen msgspec Structs rather than dataclasses: a store builds one
per object it reads, and again when it stamps the uid and creation time (`stamped`), which for a Struct
is one C call (`msgspec.structs.replace`) where a frozen dataclass sets each field through
`object.__setattr__`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kai.api.errors import InputError, Source
from kai.api.fields import Reader, is_mapping


class OwnerReference(msgspec.Struct, frozen=True, kw_only=True):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


class ObjectMeta(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = msgspec.field(default_factory=dict)
    annotations: Mapping[str, str] = msgspec.field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None  # set once deletion was asked for (the object is terminating)

    def stamped(self, *, uid: str, created: float) -> ObjectMeta:
        """This metadata with the uid and creation time the API server gives an object it stores."""
        return msgspec.structs.replace(self, uid=uid, creation_timestamp=created)


def read_meta(raw: Mapping[str, Any], *, source: Source | None, kind: str, namespaced: bool) -> ObjectMeta:
    """Parse `metadata`; a missing name is an error, a namespaced object defaults to `default`."""
    meta = raw.get("metadata")
    if meta is None:
        meta = {}  # `metadata:` left empty reads as null; the name is what is missing
    if not is_mapping(meta):
        raise InputError(source=source, kind=kind, name="", field="metadata", problem="must be a mapping")
    name = meta.get("name")
    if name is None or name == "":
        raise InputError(
            source=source, kind=kind, name="", field="metadata.name", problem="is missing; every object needs a name"
        )
    if not isinstance(name, str):
        raise InputError(source=source, kind=kind, name="", field="metadata.name", problem="must be a string")
    reader = Reader(meta, source=source, kind=kind, name=name, path="metadata")
    owners = []
    for ref in reader.children("ownerReferences"):
        owners.append(
            OwnerReference(
                api_version=ref.text("apiVersion"),
                kind=ref.text("kind"),
                name=ref.text("name"),
                uid=ref.text("uid"),
                controller=ref.flag("controller", False),
            )
        )
    namespace = reader.text("namespace", "default") if namespaced else ""
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=reader.text("uid"),
        labels=reader.string_map("labels"),
        annotations=reader.string_map("annotations"),
        owner_references=tuple(owners),
        creation_timestamp=reader.timestamp("creationTimestamp"),
        deletion_timestamp=reader.timestamp("deletionTimestamp"),
    )
