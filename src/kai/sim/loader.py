"""Reads `-f` paths like `kubectl apply -f`: files, directories of YAML/JSON, http(s) URLs, or `-` for stdin.

Every bad object is reported (file, document, object, field); the run stops with exit 2 only
after all of them have been listed, so a user fixes them in one go. Checks that need the whole input
(queues whose parents form a loop, no objects at all) run after every document has been parsed.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from kai.api import json_decode, kinds, strict
from kai.api.errors import InputError, InputWarning, Source
from kai.api.fields import is_mapping, parse_duration
from kai.api.manifest import ApiObject, Document, SkippedObject, parse_document, split_documents
from kai.api.queue import Queue, cycle_problem, parent_cycles, queue_warnings
from kai.deploy import crds

URL_TIMEOUT_SECONDS = 30.0
URL_MAX_BYTES = 256 * 1024 * 1024


class Loaded(msgspec.Struct, frozen=True, kw_only=True):
    objects: list[tuple[ApiObject, Mapping[str, Any]]]  # typed object and its raw document (never mutated)
    skipped: list[SkippedObject]
    errors: list[InputError]
    # usable input that likely does not do what was meant
    warnings: list[InputWarning] = msgspec.field(default_factory=list)


def is_url(path: str) -> bool:
    return path.startswith(("http://", "https://"))


def is_json(file: str) -> bool:
    return file.endswith(".json")


def _files(path: str) -> list[str]:
    if path == "-" or is_url(path) or not os.path.isdir(path):
        return [path]
    out = []
    for root, _, names in sorted(os.walk(path)):
        for name in sorted(names):
            if name.endswith((".yaml", ".yml", ".json")):
                out.append(os.path.join(root, name))
    return out


def _file_error(file: str, problem: str) -> InputError:
    return InputError(source=None, kind="file", name=file, field="", problem=problem)


def _fetch(url: str) -> str:
    """The body of an http(s) URL as text, as `kubectl apply -f URL` reads it."""
    import urllib.error  # only a URL needs the HTTP stack (0.03 s to import)
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT_SECONDS) as response:
            body: bytes = response.read(URL_MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise _file_error(url, f"cannot be fetched: the server answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise _file_error(url, f"cannot be fetched: {exc.reason}") from None
    except (OSError, ValueError) as exc:
        raise _file_error(url, f"cannot be fetched: {exc}") from None
    if len(body) > URL_MAX_BYTES:
        raise _file_error(url, f"cannot be fetched: larger than {URL_MAX_BYTES // 2**20} MiB")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise _file_error(url, "is not UTF-8 text") from None


def _read(file: str) -> str | bytes:
    """What a path holds: stdin's or a URL's text, a file's bytes (`_text` reads them as text)."""
    if file == "-":
        return sys.stdin.read()
    if is_url(file):
        return _fetch(file)
    try:
        with open(file, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise _file_error(file, f"cannot be read: {exc.strerror or exc}") from None


def _text(file: str, content: str | bytes) -> str:
    """The text of what `_read` gave, as a text-mode `open` reads a file: UTF-8, with universal newlines
    (its incremental decoding took longer than decoding the bytes at once)."""
    if isinstance(content, str):
        return content
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise _file_error(file, "is not UTF-8 text") from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _queue_cycle_errors(queues: Sequence[tuple[Queue, Source]]) -> list[InputError]:
    """One error per loop of parent queues, naming every queue in it (KAI would never schedule them)."""
    source = {queue.name: where for queue, where in queues}
    errors = []
    for cycle in parent_cycles([queue for queue, _ in queues]):
        others = "; ".join(f"{name} in {source[name]}" for name in cycle[1:])
        errors.append(
            InputError(
                source=source[cycle[0]],
                kind="Queue",
                name=cycle[0],
                field="spec.parentQueue",
                problem=f"{cycle_problem(cycle)} (the others: {others})",
            )
        )
    return errors


def without_nulls(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without null-valued fields, at any depth: the API server stores `labels: null` as no labels,
    so nothing downstream (controllers, the pod grouper, explanations) ever sees a null where it expects
    a mapping or a list. Null list items are kept (they stay visible to the parsers, which refuse them)."""
    out: dict[str, Any] = {}
    stack: list[tuple[Any, Any]] = [(raw, out)]
    while stack:
        source, target = stack.pop()
        if is_mapping(source):
            for key, value in source.items():
                if value is None:
                    continue
                if isinstance(value, list) or is_mapping(value):
                    copy: Any = {} if is_mapping(value) else []
                    target[key] = copy
                    stack.append((value, copy))
                else:
                    target[key] = value
        else:
            for value in source:
                if isinstance(value, list) or is_mapping(value):
                    copy = {} if is_mapping(value) else []
                    target.append(copy)
                    stack.append((value, copy))
                else:
                    target.append(value)
    return out


SIM_DURATION_ANNOTATIONS = ("sim.kai.scheduler/duration", "sim.kai.scheduler/create-at")


def _sim_annotation_errors(doc: Document, maps: list[tuple[str, Mapping[Any, Any]]]) -> list[InputError]:
    """The simulation-only duration annotations, wherever they are (pod templates too), read now: a bad
    value found later, by the engine or a controller, could no longer be traced to its file.
    `maps`: the document's `strict.metadata_maps`."""
    out = []
    for path, found in maps:
        if not path.endswith("annotations"):
            continue
        for key in SIM_DURATION_ANNOTATIONS:
            value = found.get(key)
            if value is None:
                continue
            try:
                parse_duration(str(value))
            except ValueError as exc:
                meta = doc.raw.get("metadata")
                name = meta.get("name") if isinstance(meta, Mapping) else None
                out.append(
                    InputError(
                        source=doc.source,
                        kind=str(doc.raw.get("kind", "object")),
                        name=name if isinstance(name, str) else "",
                        field=f"{path}.{key}",
                        problem=str(exc),
                    )
                )
    return out


class Schemas:
    """The schema of every kind kai reads and knows the schema of, built on first use of each kind."""

    def __init__(self) -> None:
        self._crds: dict[tuple[str, str], strict.Shape] | None = None
        self._builtin: dict[tuple[str, str], strict.Shape] = {}

    def shape(self, group: str, kind: str) -> strict.Shape | None:
        model = strict.BUILTIN_MODELS.get((group, kind))
        if model is not None:
            if (group, kind) not in self._builtin:
                self._builtin[(group, kind)] = strict.model_shape(model)
            return self._builtin[(group, kind)]
        if self._crds is None:
            shapes = strict.crd_shapes(crds.crd_manifests())
            self._crds = {(g, k): shape for (g, _, k), shape in shapes.items()}
        return self._crds.get((group, kind))

    def check(
        self, doc: Document, extra_keys: frozenset[str], maps: list[tuple[str, Mapping[Any, Any]]]
    ) -> strict.Findings:
        """Strict field validation of one document of a kind kai reads (others are left to the parser);
        `maps`: the document's `strict.metadata_maps`."""
        api_version, kind = doc.raw.get("apiVersion"), doc.raw.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            return strict.Findings(errors=[], warnings=[])
        if kinds.classify(api_version, kind).action != "read":
            return strict.Findings(errors=[], warnings=[])
        shape = self.shape(kinds.group_of(api_version), kind)
        return strict.check_document(doc.raw, source=doc.source, shape=shape, extra_keys=extra_keys, maps=maps)


def load_paths(paths: Sequence[str], *, extra_keys: frozenset[str] = frozenset()) -> Loaded:
    """Every object of every path, or every problem with them; `extra_keys` are label keys kai reads
    beyond its own (the configured queue label key)."""
    schemas = Schemas()
    warnings: list[InputWarning] = []
    objects: list[tuple[ApiObject, Mapping[str, Any]]] = []
    skipped: list[SkippedObject] = []
    errors: list[InputError] = []
    queues: list[tuple[Queue, Source]] = []
    documents = 0
    for path in paths:
        files = _files(path)
        if not files:
            errors.append(_file_error(path, "is a directory with no .yaml, .yml or .json files"))
        for file in files:
            try:
                content = _read(file)
                fast = None
                if is_json(file):
                    # msgspec reads ASCII bytes (most JSON files) as they are: no text is made of them
                    if not (isinstance(content, bytes) and content.isascii()):
                        content = _text(file, content)
                    fast = json_decode.decode_list(content, file=file, extra_keys=extra_keys)
                text = "" if fast is not None else _text(file, content)
                docs = [] if fast is not None else list(split_documents(text, file=file))
            except InputError as exc:
                errors.append(exc)
                continue
            entries: Iterable[tuple[Mapping[str, Any], Source, ApiObject | None]]
            if fast is not None:
                documents += len(fast.raws)
                entries = zip(fast.raws, itertools.repeat(fast.source), fast.objects, strict=False)
                nulls = fast.nulls
            else:
                documents += len(docs)
                entries = ((d.raw, d.source, None) for d in docs)
                # a JSON text without the word null holds no null (YAML has other ways to write one)
                nulls = not is_json(file) or "null" in text
            for raw, source, read in entries:
                if read is not None:  # the strict checks and the parser would find nothing to say
                    annotations = read.meta.annotations
                    if not annotations.keys().isdisjoint(SIM_DURATION_ANNOTATIONS):
                        found = _sim_annotation_errors(
                            Document(raw=raw, source=source), [("metadata.annotations", annotations)]
                        )
                        if found:
                            errors.extend(found)
                            continue
                    objects.append((read, raw))  # a JsonDocument: decoded if anyone reads it
                    continue
                doc = Document(raw=raw, source=source)
                maps = strict.metadata_maps(doc.raw)
                findings = schemas.check(doc, extra_keys, maps)
                warnings.extend(findings.warnings)
                problems = findings.errors + _sim_annotation_errors(doc, maps)
                if problems:
                    errors.extend(problems)
                    continue
                if nulls:
                    doc = Document(raw=without_nulls(doc.raw), source=doc.source)
                try:
                    obj = parse_document(doc)
                except InputError as exc:
                    errors.append(exc)
                    continue
                if isinstance(obj, SkippedObject):
                    skipped.append(obj)
                    continue
                if isinstance(obj, Queue):
                    queues.append((obj, doc.source))
                objects.append((obj, dict(doc.raw)))
    if not errors and documents == 0:
        where = ", ".join(paths)
        errors.append(_file_error(where, "holds no objects: there is nothing to apply"))
    errors.extend(_queue_cycle_errors(queues))
    warnings += [
        InputWarning(source=where, kind="Queue", name=q.name, field=path, reason=reason, problem=message)
        for q, where in queues
        for path, reason, message in queue_warnings(q)
    ]
    return Loaded(objects=objects, skipped=skipped, errors=errors, warnings=warnings)
