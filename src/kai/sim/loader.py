"""Reads `-f` paths like `kubectl apply -f`: files, directories of YAML/JSON, or `-` for stdin.

Every bad object is reported (file, document, object, field); the run stops with exit 2 only
after all of them have been listed, so a user fixes them in one go.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from kai.api.errors import InputError
from kai.api.manifest import ApiObject, SkippedObject, parse_document, split_documents


@dataclass(frozen=True, kw_only=True, slots=True)
class Loaded:
    objects: list[tuple[ApiObject, dict[str, object]]]  # typed object and its raw document
    skipped: list[SkippedObject]
    errors: list[InputError]


def _files(path: str) -> list[str]:
    if path == "-" or not os.path.isdir(path):
        return [path]
    out = []
    for root, _, names in sorted(os.walk(path)):
        for name in sorted(names):
            if name.endswith((".yaml", ".yml", ".json")):
                out.append(os.path.join(root, name))
    return out


def load_paths(paths: Sequence[str]) -> Loaded:
    objects: list[tuple[ApiObject, dict[str, object]]] = []
    skipped: list[SkippedObject] = []
    errors: list[InputError] = []
    for path in paths:
        for file in _files(path):
            try:
                if file == "-":
                    text = sys.stdin.read()
                else:
                    with open(file, encoding="utf-8") as fh:
                        text = fh.read()
            except OSError as exc:
                errors.append(
                    InputError(
                        source=None,
                        kind="file",
                        name=file,
                        field="",
                        problem=f"cannot be read: {exc.strerror}",
                    )
                )
                continue
            try:
                docs = list(split_documents(text, file=file))
            except InputError as exc:
                errors.append(exc)
                continue
            for doc in docs:
                try:
                    obj = parse_document(doc)
                except InputError as exc:
                    errors.append(exc)
                    continue
                if isinstance(obj, SkippedObject):
                    skipped.append(obj)
                else:
                    objects.append((obj, dict(doc.raw)))
    return Loaded(objects=objects, skipped=skipped, errors=errors)
