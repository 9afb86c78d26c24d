"""The fast way in for a large JSON manifest file: Pods and Nodes decoded with msgspec, not walked in Python.

Why: on a 50,000-pod input, walking every value of every decoded document in Python (the strict field
checks, then the parsers) cost three times the JSON parse itself. This module reads a `v1 List` of
JSON objects the way `kai.api.manifest` and `kai.api.strict` do, but:

* each item is decoded by msgspec into a Struct that names the top-level fields and the metadata
  fields kai reads and refuses any other (the strict check of those parts happens in the decoder);
* a Pod's or Node's `spec` and `status` are kept as their JSON text: the pods of a gang, and the
  nodes of one type, carry the same text, so each distinct text is checked (`strict.check_fields`)
  and parsed (`read_pod_body`, `read_node_body`) once, by the same code as any other document;
* label and annotation keys are checked once per distinct key (`strict.key_finding`);
* a null is looked for where it can be: the Structs take none (a null in the metadata fails the
  decoding), and each distinct `spec` and `status` text is searched for the word once;
* the raw document of an item read this way is decoded only when someone reads it (`JsonDocument`):
  a simulated cluster reads few of its pods' documents (the pod grouper, owner chains), and decoding
  every one cost as much as the typed objects.

It only ever says yes to a document the strict checks and parsers accept, with the same typed object:
anything else (another kind, a null anywhere, a value of another JSON type than the plain one, a
finding of any check, a field kai does not read) gives no object, and the caller reads that document
the ordinary way, which reports exactly today's errors and warnings. A file msgspec cannot decode, or
whose top level is not a `v1 List`, is left to the ordinary way whole.

Pure: text in, documents and typed objects out.
"""

from __future__ import annotations

import copy
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

import msgspec

from kai.api import kinds, strict
from kai.api.errors import InputError, Source
from kai.api.fields import Reader, parse_timestamp
from kai.api.meta import ObjectMeta, OwnerReference
from kai.api.node import Node, NodeBody, node_of, read_node_body
from kai.api.pod import Pod, PodBody, pod_of, read_pod_body

_ABSENT = msgspec.Raw(b"")


class _List(msgspec.Struct):
    """The top level: a `v1 List` (any other field, such as metadata, is not read, as in split_documents)."""

    kind: str
    apiVersion: str = ""
    items: list[msgspec.Raw] | None = None


class _OwnerRef(msgspec.Struct, forbid_unknown_fields=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False
    blockOwnerDeletion: bool = False


class _Meta(msgspec.Struct, forbid_unknown_fields=True):
    """No field takes a null (UNSET: absent), nor does any of `_OwnerRef`: an item with a null in its
    metadata fails to decode, and the ordinary way, which drops null fields, reads it (a null in `spec`
    or `status` is found by `_Reader._body`)."""

    name: str = ""
    namespace: str | msgspec.UnsetType = msgspec.UNSET
    uid: str = ""
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    ownerReferences: list[_OwnerRef] = msgspec.field(default_factory=list)
    creationTimestamp: str | msgspec.UnsetType = msgspec.UNSET
    deletionTimestamp: str | msgspec.UnsetType = msgspec.UNSET


class _Pod(msgspec.Struct, tag_field="kind", tag="Pod", forbid_unknown_fields=True):
    apiVersion: str
    metadata: _Meta
    spec: msgspec.Raw = _ABSENT
    status: msgspec.Raw = _ABSENT


class _Node(msgspec.Struct, tag_field="kind", tag="Node", forbid_unknown_fields=True):
    apiVersion: str
    metadata: _Meta
    spec: msgspec.Raw = _ABSENT
    status: msgspec.Raw = _ABSENT


_ITEM = msgspec.json.Decoder(_Pod | _Node)
_LIST = msgspec.json.Decoder(_List)
_BUILTINS = msgspec.json.Decoder()


class JsonDocument(Mapping[str, Any]):
    """One item of the file as `json.loads` gives it, decoded on first read. Only items this module read
    are kept this way: their text was found to decode (the metadata as a Struct, `spec` and `status` by
    `_Reader._body`), so reading one later cannot fail."""

    __slots__ = ("_doc", "_text")

    def __init__(self, text: msgspec.Raw) -> None:
        self._text = text  # a slice of the file's text (msgspec keeps the text for it, copies nothing)
        self._doc: dict[str, Any] | None = None

    def decoded(self) -> dict[str, Any]:
        """The document as a plain dict (decoded once; treat it as read-only, as this mapping is)."""
        if self._doc is None:
            self._doc = _BUILTINS.decode(self._text)
            self._text = _ABSENT
        return self._doc

    def __getitem__(self, key: str) -> Any:
        return self.decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.decoded())

    def __len__(self) -> int:
        return len(self.decoded())

    # the views of the decoded dict itself, not the ABC's generic ones (with those, `dict(document)`, as a store
    # makes its copy of each node's document, took longer than the decoding)
    def keys(self) -> KeysView[str]:
        return self.decoded().keys()

    def items(self) -> ItemsView[str, Any]:
        return self.decoded().items()

    def values(self) -> ValuesView[Any]:
        return self.decoded().values()

    def __repr__(self) -> str:
        return repr(self.decoded())

    def __deepcopy__(self, memo: dict[int, Any]) -> JsonDocument:
        """A copy that shares the text (immutable: a `Raw` is copied whole by `copy.deepcopy`)."""
        twin = JsonDocument(self._text)
        if self._doc is not None:
            twin._doc = copy.deepcopy(self._doc, memo)
        return twin


class _Undecodable(Exception):
    """A `spec` or `status` text msgspec cannot decode to Python values (a number out of range)."""


class Decoded(msgspec.Struct, frozen=True, kw_only=True):
    """The documents of one file (their raw mappings as `json.loads` gives them; a `JsonDocument` for those
    this module read), and the typed object of each that this module read (None: the caller checks and
    parses that document as any other)."""

    source: Source
    raws: list[Mapping[str, Any]]
    objects: list[Pod | Node | None]
    nulls: bool  # whether a document left to the caller may hold a null (its text has the word)


class _Reader:
    """The memory of one file's decoding: bodies by their JSON text, keys found clean, kinds by apiVersion."""

    def __init__(self, source: Source, extra_keys: frozenset[str]) -> None:
        self.source = source
        self.known = strict.KAI_KEYS | extra_keys
        self.clean_keys: set[str] = set()
        self.pod_bodies: dict[tuple[bytes, bytes], PodBody | None] = {}
        self.node_bodies: dict[tuple[bytes, bytes], NodeBody | None] = {}
        self.read_versions: dict[tuple[str, bool], bool] = {}  # by apiVersion and whether a Pod (or a Node)

    def read(self, text: msgspec.Raw) -> tuple[Pod | Node, JsonDocument] | None:
        """The typed object of one item and its lazily decoded document, or None (the ordinary way reads it);
        raises `_Undecodable` where the file cannot be read as Python values at all. An item holding a null
        is left to the ordinary way, which drops null fields: its decoding fails where the null is in the
        metadata, and `_body` refuses the text of a `spec` or `status` with the word null."""
        try:
            doc = _ITEM.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        pod = type(doc) is _Pod
        reads = self.read_versions.get((doc.apiVersion, pod))
        if reads is None:
            reads = self._reads(doc.apiVersion, "Pod" if pod else "Node")
        if not reads:
            return None
        meta = self._meta(doc.metadata, namespaced=pod)
        if meta is None:
            return None
        key = (bytes(doc.spec), bytes(doc.status))
        raw = JsonDocument(text)
        if not pod:
            try:
                node_body = self.node_bodies[key]
            except KeyError:
                node_body = self._node_body(key)
            return None if node_body is None else (node_of(meta, node_body), raw)
        try:
            pod_body = self.pod_bodies[key]
        except KeyError:
            pod_body = self._pod_body(key)
        if pod_body is None:
            return None
        try:
            return pod_of(meta, pod_body, raw, source=self.source), raw
        except InputError:
            return None

    def _reads(self, api_version: str, kind: str) -> bool:
        """Whether kai reads this kind (a Pod or a Node) at this apiVersion, remembered in `read_versions`."""
        found = kinds.classify(api_version, kind).action == "read" and kinds.group_of(api_version) == ""
        self.read_versions[(api_version, kind == "Pod")] = found
        return found

    def _meta(self, meta: _Meta, *, namespaced: bool) -> ObjectMeta | None:
        """The object's metadata as `read_meta` reads it, or None where that or the key checks may object."""
        if not meta.name:
            return None
        for keys in (meta.labels, meta.annotations):
            for key in keys:
                if key not in self.clean_keys:
                    if strict.key_finding(key, self.known) is not None:
                        return None
                    self.clean_keys.add(key)
        try:
            created = None if meta.creationTimestamp is msgspec.UNSET else parse_timestamp(meta.creationTimestamp)
            deleted = None if meta.deletionTimestamp is msgspec.UNSET else parse_timestamp(meta.deletionTimestamp)
        except (ValueError, OverflowError):
            return None
        owners = (
            tuple(
                OwnerReference(api_version=r.apiVersion, kind=r.kind, name=r.name, uid=r.uid, controller=r.controller)
                for r in meta.ownerReferences
            )
            if meta.ownerReferences
            else ()
        )
        namespace = meta.namespace if namespaced else ""
        return ObjectMeta(
            name=meta.name,
            namespace="default" if namespace is msgspec.UNSET else namespace,
            uid=meta.uid,
            labels=meta.labels,
            annotations=meta.annotations,
            owner_references=owners,
            creation_timestamp=created,
            deletion_timestamp=deleted,
        )

    def _body(self, key: tuple[bytes, bytes], shape: strict.Shape) -> dict[str, Any] | None:
        """The `spec` and `status` of these texts as a mapping, if they hold no null (the ordinary way drops
        null fields: it reads such an item) and the strict checks find nothing in them."""
        body: dict[str, Any] = {}
        for name, text in zip(("spec", "status"), key, strict=True):
            if b"null" in text:
                return None
            if text:
                try:
                    body[name] = _BUILTINS.decode(text)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    raise _Undecodable() from None
        if strict.check_fields(body, shape) or strict.metadata_maps(body):
            return None
        return body

    def _pod_body(self, key: tuple[bytes, bytes]) -> PodBody | None:
        body = self._body(key, strict.model_shape(strict.BUILTIN_MODELS[("", "Pod")]))
        found = None
        if body is not None:
            try:
                found = read_pod_body(Reader(body, source=self.source, kind="Pod", name=""))
            except InputError:
                found = None
        self.pod_bodies[key] = found
        return found

    def _node_body(self, key: tuple[bytes, bytes]) -> NodeBody | None:
        body = self._body(key, strict.model_shape(strict.BUILTIN_MODELS[("", "Node")]))
        found = None
        if body is not None:
            try:
                found = read_node_body(Reader(body, source=self.source, kind="Node", name=""))
            except InputError:
                found = None
        self.node_bodies[key] = found
        return found


def decode_list(text: str | bytes, *, file: str, extra_keys: frozenset[str]) -> Decoded | None:
    """The documents of a JSON file holding one `v1 List`, Pods and Nodes read; None for any other file
    (not such a list, or not JSON msgspec decodes: the ordinary way reads it, and names what is wrong).
    `text`: the file's text, or its bytes if they are ASCII (the text of the same characters)."""
    try:
        top = _LIST.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if top.kind != "List" or kinds.group_of(top.apiVersion) != "" or top.items is None:
        return None
    reader = _Reader(Source(file=file, index=1), extra_keys)
    raws: list[Mapping[str, Any]] = []
    objects: list[Pod | Node | None] = []
    nulls = False
    for item in top.items:
        try:
            found = reader.read(item)
        except _Undecodable:
            return None
        if found is not None:
            objects.append(found[0])
            raws.append(found[1])
            continue
        try:
            raw = _BUILTINS.decode(item)
        except (msgspec.DecodeError, msgspec.ValidationError):  # a number out of range (1e400) is not checked above
            return None
        if type(raw) is not dict:
            return None
        nulls = nulls or b"null" in bytes(item)
        raws.append(raw)
        objects.append(None)
    return Decoded(source=reader.source, raws=raws, objects=objects, nulls=nulls)
