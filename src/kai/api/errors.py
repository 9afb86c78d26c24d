"""Errors about user input, each naming the file, the document, the object and the field.

A user who gets one of these knows exactly which line of which manifest to fix; the scheduler
reports it and carries on with every other object.
"""

from __future__ import annotations

import msgspec


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """Where an object came from: a file (or `-` for standard input) and its document index."""

    file: str
    index: int

    def __str__(self) -> str:
        return f"{self.file}: document {self.index}"


class InputError(ValueError):
    """Unusable input. The message reads `file: document N: Kind name: field: problem`."""

    def __init__(self, *, source: Source | None, kind: str, name: str, field: str, problem: str) -> None:
        self.source = source
        self.kind = kind
        self.name = name
        self.field = field
        self.problem = problem
        where = f"{source}: " if source is not None else ""
        obj = f"{kind} {name}" if name else kind
        at = f"{field}: " if field else ""
        super().__init__(f"{where}{obj}: {at}{problem}")


class InputWarning(msgspec.Struct, frozen=True, kw_only=True):
    """Usable input that likely does not do what was meant; reads like an `InputError`, with a reason."""

    source: Source | None
    kind: str
    name: str
    field: str
    reason: str  # a CamelCase event reason, such as QueueResourceUnset
    problem: str

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source is not None else ""
        obj = f"{self.kind} {self.name}" if self.name else self.kind
        at = f"{self.field}: " if self.field else ""
        return f"{where}{obj}: {at}{self.problem}"
