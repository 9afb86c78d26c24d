"""Manifests: YAML or JSON text in, typed objects out, the way `kubectl apply -f` reads them.

Parsing is pure (text in, objects out); reading files is the caller's job. A `v1 List` is
unpacked into its items. Workload kinds whose controllers the simulator emulates are kept as
`Workload` (their metadata parsed, the body raw) for the controllers and the pod grouper.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
import yaml

from kai.api import kinds
from kai.api.errors import InputError, Source
from kai.api.fields import Reader, is_mapping
from kai.api.kinds import group_of as group_of  # re-exported: callers read it from here
from kai.api.meta import ObjectMeta, read_meta
from kai.api.node import Node, parse_node
from kai.api.pod import Pod, parse_pod
from kai.api.podgroup import PodGroup, parse_podgroup
from kai.api.priority import PriorityClass, parse_priority_class
from kai.api.queue import Queue, parse_queue


class Workload(msgspec.Struct, frozen=True, kw_only=True):
    """A controller-managed object (Deployment, RayCluster, PyTorchJob, ...): metadata plus raw body."""

    meta: ObjectMeta
    api_version: str
    kind: str
    raw: Mapping[str, Any]
    source: Source | None

    @property
    def group_kind(self) -> str:
        return f"{group_of(self.api_version)}/{self.kind}"

    @property
    def name(self) -> str:
        return self.meta.name


class Namespace(msgspec.Struct, frozen=True, kw_only=True):
    meta: ObjectMeta


class ConfigMap(msgspec.Struct, frozen=True, kw_only=True):
    meta: ObjectMeta
    data: Mapping[str, str]


ApiObject = Node | Pod | PodGroup | Queue | PriorityClass | Namespace | ConfigMap | Workload


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """One raw object and where it came from."""

    raw: Mapping[str, Any]
    source: Source


class SkippedObject(msgspec.Struct, frozen=True, kw_only=True):
    """An object of a kind kai does not understand; reported to the user, never silently dropped."""

    source: Source
    api_version: str
    kind: str
    name: str
    reason: str


def _syntax_error(exc: yaml.YAMLError | json.JSONDecodeError) -> str:
    """A YAML/JSON syntax error as `line L, column C: problem` (the file is named by the caller)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    text = f"is not valid YAML: {where}{problem}"
    if context:
        at = f" at line {context_mark.line + 1}, column {context_mark.column + 1}" if context_mark is not None else ""
        text += f" ({context}{at})"
    return text


class _ManifestLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML as kubectl reads it: besides PyYAML's YAML 1.1 floats, `1e3` and `-2E-5` (no dot) are numbers."""


_ManifestLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def split_documents(text: str, *, file: str) -> Iterator[Document]:
    """The objects in one file's text: JSON if the file ends in .json, else multi-document YAML."""
    try:
        if file.endswith(".json"):
            loaded: list[Any] = [json.loads(text)] if text.strip() else []
        else:
            loaded = list(yaml.load_all(text, Loader=_ManifestLoader))
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise InputError(source=None, kind="file", name=file, field="", problem=_syntax_error(exc)) from None
    except RecursionError:
        raise InputError(source=None, kind="file", name=file, field="", problem="nests too deeply to read") from None
    index = 0
    for doc in loaded:
        if doc is None:
            continue
        index += 1
        source = Source(file=file, index=index)
        if not isinstance(doc, Mapping):
            raise InputError(
                source=source,
                kind="document",
                name="",
                field="",
                problem=f"must be a mapping (an object with apiVersion, kind and metadata), got {_show_type(doc)}",
            )
        if doc.get("kind") == "List" and group_of(str(doc.get("apiVersion", ""))) == "":
            items = doc.get("items")
            if items is None:
                continue
            if not isinstance(items, list):
                raise InputError(source=source, kind="List", name="", field="items", problem="must be a list")
            for i, item in enumerate(items):
                if not is_mapping(item):
                    raise InputError(
                        source=source,
                        kind="List",
                        name="",
                        field=f"items[{i}]",
                        problem=f"must be a mapping, got {_show_type(item)}",
                    )
                yield Document(raw=item, source=source)
            continue
        yield Document(raw=doc, source=source)


def _show_type(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def parse_document(doc: Document) -> ApiObject | SkippedObject:
    """The typed object for one document, or a SkippedObject for a real kind kai does not read.

    A kind no API server would serve (a typo such as `Queu`, or `Queue` under `apiVersion: v1`) is an
    `InputError`, as `kubectl apply` refuses it.
    """
    raw, source = doc.raw, doc.source
    api_version = raw.get("apiVersion")
    kind = raw.get("kind")
    name = _name_of(raw)
    if not isinstance(kind, str) or not kind:
        problem = "is missing" if kind is None else f"must be a string, got {_show_type(kind)}"
        raise InputError(source=source, kind="object", name=name, field="kind", problem=problem)
    if not isinstance(api_version, str) or not api_version:
        problem = "is missing" if api_version is None else f"must be a string, got {_show_type(api_version)}"
        raise InputError(source=source, kind=kind, name=name, field="apiVersion", problem=problem)
    verdict = kinds.classify(api_version, kind)
    if verdict.action == "refuse":
        raise InputError(source=source, kind=kind, name=name, field=verdict.field, problem=verdict.reason)
    if verdict.action == "skip":
        return SkippedObject(source=source, api_version=api_version, kind=kind, name=name, reason=verdict.reason)
    group = group_of(api_version)
    if group == "" and kind == "Pod":
        return parse_pod(raw, source=source)
    if group == "" and kind == "Node":
        return parse_node(raw, source=source)
    if group == "scheduling.run.ai" and kind == "Queue":
        return parse_queue(raw, source=source)
    if group == "scheduling.run.ai" and kind == "PodGroup":
        return parse_podgroup(raw, source=source)
    if group == "scheduling.k8s.io" and kind == "PriorityClass":
        return parse_priority_class(raw, source=source)
    if group == "" and kind == "Namespace":
        return Namespace(meta=read_meta(raw, source=source, kind=kind, namespaced=False))
    if group == "" and kind == "ConfigMap":
        meta = read_meta(raw, source=source, kind=kind, namespaced=True)
        data = Reader(raw, source=source, kind=kind, name=meta.name).string_map("data")
        return ConfigMap(meta=meta, data=data)
    meta = read_meta(raw, source=source, kind=kind, namespaced=True)
    if not isinstance(raw.get("spec"), Mapping):
        problem = "is missing" if raw.get("spec") is None else "must be a mapping"
        raise InputError(source=source, kind=kind, name=meta.name, field="spec", problem=problem)
    return Workload(meta=meta, api_version=api_version, kind=kind, raw=raw, source=source)


def _name_of(raw: Mapping[str, Any]) -> str:
    """metadata.name when it is a plain string (for naming the object in an error), else empty."""
    meta = raw.get("metadata")
    name = meta.get("name") if is_mapping(meta) else None
    return name if isinstance(name, str) else ""
