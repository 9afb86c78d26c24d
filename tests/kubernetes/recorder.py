"""An informer handler that records what it is told, and lets a test wait for a condition on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WAIT_SECONDS = 30.0  # generous: a condition that does not hold by then is a failure, not slowness


@dataclass
class Recorder:
    """Implements `InformerHandler`; `events` holds (type, name) in delivery order."""

    events: list[tuple[str, str]] = field(default_factory=list)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._changed = asyncio.Event()

    def _note(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.events.append((kind, name))
        if kind == "delete":
            self.objects.pop(name, None)
        else:
            self.objects[name] = obj
        self._changed.set()

    def on_add(self, obj: dict[str, Any]) -> None:
        self._note("add", obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._note("update", new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._note("delete", obj)

    def since(self, mark: int) -> list[tuple[str, str]]:
        return self.events[mark:]

    async def wait_for(self, condition: Callable[[Recorder], bool], what: str) -> None:
        """Wait until `condition(self)` holds; fail naming `what` and the events seen if it does not."""
        try:
            async with asyncio.timeout(WAIT_SECONDS):
                while not condition(self):
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"never saw {what}; events: {self.events}") from None
