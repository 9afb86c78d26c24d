"""The one place where plugins and actions are registered by name.

An unknown name in the configuration is an error when the configuration is loaded, not a log line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Protocol

from kai.core.session import Session
from kai.plugins.fragmentation_policy import FragmentationPlugin
from kai.plugins.minruntime import MinRuntimePlugin
from kai.plugins.nodeorder import NodeOrderPlugin
from kai.plugins.priority import PriorityPlugin
from kai.plugins.proportion.plugin import ProportionPlugin
from kai.plugins.proportion.reclaimable import ReclaimablePlugin


class Plugin(Protocol):
    name: str

    def on_session_open(self, session: Session) -> None: ...


class Action(Protocol):
    name: str

    def execute(self, session: Session) -> None: ...


# Plugins open in this order (KAI's operator priorities: proportion, priority, ..., minruntime, node
# order). The reclaimable rules are part of KAI's proportion plugin and need its fair shares.
PLUGINS: tuple[Callable[[], Plugin], ...] = (
    ProportionPlugin,
    ReclaimablePlugin,
    PriorityPlugin,
    MinRuntimePlugin,
    NodeOrderPlugin,
    FragmentationPlugin,
)

# Per-plugin arguments accepted in the configuration's `plugins:` map, with their allowed values
# (None: any value). A plugin absent here takes no arguments.
PLUGIN_ARGUMENTS: Mapping[str, Mapping[str, tuple[str, ...] | None]] = {
    "minruntime": {"reclaimResolveMethod": ("lca", "queue")},
}


def plugin_names() -> tuple[str, ...]:
    return tuple(factory().name for factory in PLUGINS)


# action name -> its class in kai.actions, imported when a configuration first runs the action (a
# `kai sim --actions allocate` run imports no victim action)
ACTIONS: Mapping[str, tuple[str, str]] = {
    "allocate": ("kai.actions.allocate", "AllocateAction"),
    "consolidation": ("kai.actions.consolidation", "ConsolidationAction"),
    "reclaim": ("kai.actions.reclaim", "ReclaimAction"),
    "preempt": ("kai.actions.preempt", "PreemptAction"),
    "stalegangeviction": ("kai.actions.stalegangeviction", "StaleGangEvictionAction"),
}
KNOWN_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


def make_action(name: str) -> Action | None:
    """The action for a configured name; None for a known action this build does not run."""
    if name not in KNOWN_ACTIONS:
        raise KeyError(f'unknown action "{name}"; known actions: {", ".join(KNOWN_ACTIONS)}')
    found = ACTIONS.get(name)
    if found is None:
        return None
    module, class_name = found
    factory: Callable[[], Action] = getattr(importlib.import_module(module), class_name)
    return factory()
