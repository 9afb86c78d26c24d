"""The scheduler configuration file (`kai sim --config`, `kai run --config`): known keys only, clear errors.

One file, one behaviour: both commands read it through this module, with the same defaults and errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from kai.api.errors import InputError
from kai.api.fields import parse_duration
from kai.core.session import SchedulerConfig
from kai.scheduler.registry import KNOWN_ACTIONS, PLUGIN_ARGUMENTS, plugin_names

# Every key of the file: an example value (the default) and what it sets, as `kai sim --help-config` prints them.
KEY_HELP: dict[str, tuple[str, str]] = {
    "actions": (
        "[allocate, consolidation, reclaim, preempt, stalegangeviction]",
        "the actions each cycle runs, in order (--actions overrides)",
    ),
    "placementStrategy": (
        "{gpu: binpack, cpu: binpack}",
        "binpack or spread per resource; gpu also fragmentation; gpu also picks the device for fractions",
    ),
    "schedulePeriod": ("1s", "virtual time between two scheduling cycles"),
    "stalenessGracePeriod": (
        "60s",
        "how long a running gang may stay below its minimum before eviction; negative: never",
    ),
    "queueLabelKey": ("kai.scheduler/queue", "the label that names a workload's queue"),
    "maxConsolidationPreemptees": ("16", "at most this many pods moved by consolidation for one job"),
    "reclaimerUtilizationMultiplier": (
        "1.0",
        "multiplier of reclaim's saturation check, which keeps two queues from evicting each other (>= 1)",
    ),
    "plugins": ("{minruntime: {reclaimResolveMethod: lca}}", "per-plugin arguments (lca | queue)"),
    "kValue": ("1.0", "weight of the over-quota usage term in the fair-share division"),
    "queueDepthPerAction": ("0", "jobs tried per queue in each action; 0: no cap"),
    "evictionMode": ("delete", "how a cluster's victims are removed: delete (the pod) or eviction (the Eviction API)"),
    "maxActionScenarios": (
        "{default: 0, reclaim: 0, preempt: 0, consolidation: 0}",
        "scenarios one action may simulate per cycle before it stops (default: the others); 0: no limit",
    ),
}
SEARCH_ACTIONS = ("default", "reclaim", "preempt", "consolidation")
KEYS = tuple(KEY_HELP)


def _error(field: str, problem: str, file: str) -> InputError:
    return InputError(source=None, kind="config", name=file, field=field, problem=problem)


def parse_actions(value: object, *, file: str, field: str = "actions") -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise _error(field, "must be a list of action names", file)
    names = tuple(str(a).strip() for a in items if str(a).strip())
    for name in names:
        if name not in KNOWN_ACTIONS:
            raise _error(field, f'unknown action "{name}"; known actions: {", ".join(KNOWN_ACTIONS)}', file)
    return names


def parse_config(raw: Mapping[str, Any] | None, *, file: str) -> SchedulerConfig:
    raw = raw or {}
    if not isinstance(raw, Mapping):
        raise _error("", "must be a mapping", file)
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise _error(unknown[0], f"unknown key; known keys: {', '.join(KEYS)}", file)
    cfg: dict[str, Any] = {}
    if "actions" in raw:
        cfg["actions"] = parse_actions(raw["actions"], file=file)
    placement = raw.get("placementStrategy") or {}
    if not isinstance(placement, Mapping):
        raise _error("placementStrategy", "must be a mapping such as {gpu: binpack, cpu: binpack}", file)
    for key, value in placement.items():
        if key not in ("gpu", "cpu"):
            raise _error(f"placementStrategy.{key}", "unknown key; known keys: gpu, cpu", file)
        strategies = ("binpack", "spread", "fragmentation") if key == "gpu" else ("binpack", "spread")
        if value not in strategies:
            raise _error(f"placementStrategy.{key}", f'must be {" or ".join(strategies)}, got "{value}"', file)
        cfg[f"{key}_placement"] = value
        if key == "gpu":
            cfg["gpu_device_policy"] = "spread" if value == "spread" else "binpack"
    for key, attr in (
        ("schedulePeriod", "schedule_period"),
        ("stalenessGracePeriod", "staleness_grace_period"),
    ):
        if key in raw:
            try:
                cfg[attr] = parse_duration(str(raw[key]))
            except ValueError as exc:
                raise _error(key, str(exc), file) from None
    if cfg.get("schedule_period", 1.0) <= 0:
        raise _error("schedulePeriod", "must be positive", file)
    if "evictionMode" in raw:
        if raw["evictionMode"] not in ("delete", "eviction"):
            raise _error("evictionMode", f'must be delete or eviction, got "{raw["evictionMode"]}"', file)
        cfg["eviction_mode"] = raw["evictionMode"]
    if "queueLabelKey" in raw:
        cfg["queue_label_key"] = str(raw["queueLabelKey"])
    for key, attr, kind in (
        ("maxConsolidationPreemptees", "max_consolidation_preemptees", int),
        ("queueDepthPerAction", "queue_depth_per_action", int),
        ("reclaimerUtilizationMultiplier", "reclaimer_utilization_multiplier", float),
        ("kValue", "k_value", float),
    ):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise _error(key, f"must be a non-negative number, got {value!r}", file)
            cfg[attr] = kind(value)
    if cfg.get("reclaimer_utilization_multiplier", 1.0) < 1.0:
        raise _error("reclaimerUtilizationMultiplier", "must be at least 1", file)
    if "maxActionScenarios" in raw:
        cfg["max_action_scenarios"] = _action_scenarios(raw["maxActionScenarios"], file=file)
    plugins = raw.get("plugins") or {}
    if not isinstance(plugins, Mapping) or not all(isinstance(v, Mapping | None) for v in plugins.values()):
        raise _error("plugins", "must map plugin names to argument mappings", file)
    cfg["plugins"] = {str(k): dict(v or {}) for k, v in plugins.items()}
    known = plugin_names()
    for plugin, args in cfg["plugins"].items():
        if plugin not in known:
            raise _error(f"plugins.{plugin}", f"unknown plugin; known plugins: {', '.join(known)}", file)
        allowed = PLUGIN_ARGUMENTS.get(plugin, {})
        for arg, value in args.items():
            if arg not in allowed:
                names = ", ".join(allowed) or "none"
                raise _error(f"plugins.{plugin}.{arg}", f"unknown argument; known arguments: {names}", file)
            choices = allowed[arg]
            if choices is not None and str(value) not in choices:
                raise _error(f"plugins.{plugin}.{arg}", f"must be one of {', '.join(choices)}, got {value!r}", file)
    return SchedulerConfig(**cfg)


def _action_scenarios(value: object, *, file: str) -> dict[str, int]:
    field = "maxActionScenarios"
    if not isinstance(value, Mapping):
        raise _error(field, "must be a mapping such as {reclaim: 500, preempt: 500}", file)
    budgets: dict[str, int] = {}
    for key, limit in value.items():
        if key not in SEARCH_ACTIONS:
            raise _error(f"{field}.{key}", f"unknown key; known keys: {', '.join(SEARCH_ACTIONS)}", file)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise _error(f"{field}.{key}", f"must be a non-negative whole number, got {limit!r}", file)
        budgets[str(key)] = limit
    return budgets


def load_config(path: str) -> SchedulerConfig:
    try:
        with open(path, encoding="utf-8") as fh:
            raw = yaml.safe_load(fh)
    except OSError as exc:
        raise _error("", f"cannot be read: {exc.strerror}", path) from None
    except yaml.YAMLError as exc:
        raise _error("", f"is not valid YAML: {exc}", path) from None
    return parse_config(raw, file=path)
