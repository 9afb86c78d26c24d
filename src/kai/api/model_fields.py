"""The fields of the Kubernetes models kai checks documents against, read from lightkube-models or from
the copy of them this package ships (`model_fields.json`).

Why a copy: the strict field checks (`kai.api.strict`) need the schema of every built-in kind kai reads
(Pod, Node, Job, ...), and getting it from lightkube means importing lightkube (its client, HTTP stack
and all: 0.1 s) and translating some 200 model classes with `msgspec.inspect` (another 0.1 s) at every
`kai sim` start. The JSON copy is the same table, written by this module from the pinned
lightkube-models (`python -m kai.api.model_fields`); `tests/test_strict_fields.py` checks that it is
what lightkube-models gives today, so upgrading the pin without rewriting it fails the tests.

The table: model name ("core_v1.PodSpec") -> field (its JSON name) -> type, where a type is "any" (a
scalar, or a union of several kinds of value), {"model": name}, {"list": type} or {"map": type}. A
union of one type and None is that type, as the strict checks read a null as absent.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
from collections.abc import Iterable
from typing import Any

TABLE_FILE = pathlib.Path(__file__).with_name("model_fields.json")

Table = dict[str, dict[str, Any]]


def shipped() -> Table:
    """The table this package ships."""
    table: Table = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
    return table


def from_lightkube(roots: Iterable[str]) -> Table:
    """The table of the lightkube models `roots` ("core_v1.Pod", ...) and every model they contain."""
    import msgspec.inspect as mi  # lightkube's models are msgspec Structs

    table: Table = {}

    def name_of(cls: type) -> str:
        return f"{cls.__module__.removeprefix('lightkube.models.')}.{cls.__name__}"

    def add(cls: type) -> str:
        name = name_of(cls)
        if name not in table:
            fields: dict[str, Any] = {}
            table[name] = fields  # registered before its fields, so a model that contains itself ends
            info = mi.type_info(cls)
            assert isinstance(info, mi.StructType)
            for f in info.fields:
                fields[f.encode_name] = type_of(f.type)
        return name

    def type_of(info: Any) -> Any:
        if isinstance(info, mi.UnionType):
            options = [t for t in info.types if not isinstance(t, mi.NoneType)]
            return type_of(options[0]) if len(options) == 1 else "any"
        if isinstance(info, mi.StructType):
            return {"model": add(info.cls)}
        if isinstance(info, mi.ListType):
            return {"list": type_of(info.item_type)}
        if isinstance(info, mi.DictType):
            return {"map": type_of(info.value_type)}
        return "any"

    for root in roots:
        module, cls_name = root.rsplit(".", 1)
        add(getattr(importlib.import_module(f"lightkube.models.{module}"), cls_name))
    return table


def write(roots: Iterable[str]) -> None:
    """Write the shipped table from lightkube-models (after upgrading it, or checking a new kind)."""
    table = from_lightkube(roots)
    lines = [f"{json.dumps(name)}: {json.dumps(fields)}" for name, fields in table.items()]
    TABLE_FILE.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


if __name__ == "__main__":
    from kai.api import strict

    write(strict.MODEL_ROOTS)
    print(f"wrote {TABLE_FILE}", file=sys.stderr)
