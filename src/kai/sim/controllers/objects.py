"""Shared building blocks of the emulated controllers: validated field access, object metadata,
pod construction from templates, pod state classification and the error guard.

Every controller reads raw dicts through the `req_*`/`opt_*` accessors, which raise
`InvalidSpec` with the dotted path of the offending field; `guarded` turns that (and any
malformed-input surprise) into a `SpecError` value so that no exception leaves a controller.
"""

from __future__ import annotations

import abc
import copy
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kai.sim.controllers import model

# Sim-only annotation keys the controllers read or write.
DURATION_ANNOTATION = "sim.kai.scheduler/duration"
# Controller bookkeeping kept inside an owner's status (never shown to users).
TRACKING_KEY = "sim.kai.scheduler/tracking"

KAI_SCHEDULER = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"


class InvalidSpec(Exception):
    """Raised inside a controller for an unusable field; `guarded` converts it to a SpecError."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.hint = hint


# ---------------------------------------------------------------------------------------------
# Field access


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def req_map(obj: Mapping[str, Any], key: str, *, path: str, hint: str = "") -> Mapping[str, Any]:
    """The mapping at `obj[key]`; missing or not a mapping is an InvalidSpec naming `path.key`."""
    field = _join(path, key)
    value = obj.get(key)
    if value is None:
        raise InvalidSpec(field, "is required but missing", hint or f"add `{key}` to the manifest")
    if not isinstance(value, Mapping):
        raise InvalidSpec(field, f"must be a mapping, got {type(value).__name__}", hint or f"make `{key}` a mapping")
    return value


def opt_map(obj: Mapping[str, Any], key: str, *, path: str) -> Mapping[str, Any]:
    """The mapping at `obj[key]`, or an empty mapping when absent."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidSpec(_join(path, key), f"must be a mapping, got {type(value).__name__}", f"make `{key}` a mapping")
    return value


def opt_list(obj: Mapping[str, Any], key: str, *, path: str) -> Sequence[Any]:
    """The list at `obj[key]`, or an empty list when absent."""
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidSpec(_join(path, key), f"must be a list, got {type(value).__name__}", f"make `{key}` a list")
    return value


def opt_int(obj: Mapping[str, Any], key: str, *, path: str, default: int, minimum: int | None = 0) -> int:
    """The integer at `obj[key]` (default when absent), checked against `minimum`."""
    value = obj.get(key)
    if value is None:
        return default
    return _check_int(value, field=_join(path, key), minimum=minimum)


def opt_int_or_none(obj: Mapping[str, Any], key: str, *, path: str, minimum: int | None = 0) -> int | None:
    """The integer at `obj[key]`, or None when absent."""
    value = obj.get(key)
    if value is None:
        return None
    return _check_int(value, field=_join(path, key), minimum=minimum)


# Fields that multiply the pods a controller creates, and the most the simulator makes of each: a real
# controller creates pods a few at a time for ever, the simulator creates them all at once.
POD_COUNT_FIELDS = frozenset(
    {"replicas", "parallelism", "completions", "maxReplicas", "minReplicas", "numOfHosts", "size"}
)
MAX_SIMULATED_COUNT = 100_000
INT32_MAX = 2**31 - 1  # Kubernetes counts are int32; the API server refuses more


def _check_int(value: Any, *, field: str, minimum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(field, f"must be an integer, got {value!r}", "write a whole number without quotes")
    if minimum is not None and value < minimum:
        raise InvalidSpec(field, f"must be >= {minimum}, got {value}", f"use a value of at least {minimum}")
    if value > INT32_MAX:
        raise InvalidSpec(field, f"must be at most {INT32_MAX} (a 32-bit integer), got {value}", "use a smaller value")
    if field.rsplit(".", 1)[-1] in POD_COUNT_FIELDS and value > MAX_SIMULATED_COUNT:
        raise InvalidSpec(
            field,
            f"is {value}; kai sim creates at most {MAX_SIMULATED_COUNT} pods from one count",
            "use a smaller count to simulate",
        )
    return value


def opt_str(obj: Mapping[str, Any], key: str, *, path: str, default: str = "") -> str:
    """The string at `obj[key]` (default when absent)."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidSpec(_join(path, key), f"must be a string, got {value!r}", f"quote the value of `{key}`")
    return value


def req_str(obj: Mapping[str, Any], key: str, *, path: str, hint: str = "") -> str:
    """The non-empty string at `obj[key]`."""
    value = opt_str(obj, key, path=path)
    if not value:
        raise InvalidSpec(_join(path, key), "is required but missing", hint or f"set `{key}`")
    return value


def opt_bool(obj: Mapping[str, Any], key: str, *, path: str, default: bool = False) -> bool:
    """The boolean at `obj[key]` (default when absent)."""
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidSpec(_join(path, key), f"must be true or false, got {value!r}", "write true or false")
    return value


def one_of(value: str, allowed: Iterable[str], *, field: str) -> str:
    """Check an enum-like string field."""
    options = tuple(allowed)
    if value not in options:
        raise InvalidSpec(field, f"must be one of {', '.join(options)}, got {value!r}", "use one of the listed values")
    return value


def string_map(value: Mapping[str, Any], *, field: str) -> dict[str, str]:
    """A labels/annotations mapping with string values."""
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str):
            raise InvalidSpec(f"{field}.{key}", f"must be a string, got {item!r}", "quote the value")
        result[str(key)] = item
    return result


# ---------------------------------------------------------------------------------------------
# Object metadata


def meta(obj: model.Obj) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def name_of(obj: model.Obj) -> str:
    value = meta(obj).get("name")
    return value if isinstance(value, str) else ""


def namespace_of(obj: model.Obj) -> str:
    value = meta(obj).get("namespace")
    return value if isinstance(value, str) and value else "default"


def uid_of(obj: model.Obj) -> str:
    value = meta(obj).get("uid")
    return value if isinstance(value, str) else ""


def kind_of(obj: model.Obj) -> str:
    value = obj.get("kind")
    return value if isinstance(value, str) else ""


def api_version_of(obj: model.Obj) -> str:
    value = obj.get("apiVersion")
    return value if isinstance(value, str) else ""


def labels_of(obj: model.Obj) -> dict[str, str]:
    value = meta(obj).get("labels")
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def annotations_of(obj: model.Obj) -> dict[str, str]:
    value = meta(obj).get("annotations")
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def spec_of(obj: model.Obj) -> Mapping[str, Any]:
    """The owner's spec; a missing or non-mapping spec is an InvalidSpec."""
    return req_map(obj, "spec", path="")


def status_of(obj: model.Obj) -> Mapping[str, Any]:
    value = obj.get("status")
    return value if isinstance(value, Mapping) else {}


def tracking_of(obj: model.Obj) -> Mapping[str, Any]:
    """The controller bookkeeping stored in the owner's status."""
    value = status_of(obj).get(TRACKING_KEY)
    return value if isinstance(value, Mapping) else {}


def owner_reference(owner: model.Obj) -> dict[str, Any]:
    """A controller ownerReference pointing at `owner`."""
    return {
        "apiVersion": api_version_of(owner),
        "kind": kind_of(owner),
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def ref_to(obj: model.Obj) -> model.ObjectRef:
    """An ObjectRef naming `obj` (for deletion)."""
    return model.ObjectRef(
        api_version=api_version_of(obj),
        kind=kind_of(obj),
        namespace=namespace_of(obj),
        name=name_of(obj),
        uid=uid_of(obj),
    )


def children_of_kind(children: Sequence[model.Obj], kind: str) -> list[model.Obj]:
    """The children of one kind, sorted by name (then uid) for determinism."""
    found = [child for child in children if kind_of(child) == kind]
    return sorted(found, key=lambda child: (name_of(child), uid_of(child)))


def new_object(
    *,
    api_version: str,
    kind: str,
    name: str,
    namespace: str,
    uid: str,
    owner: model.Obj,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: Mapping[str, Any],
    generate_name: str | None = None,
) -> dict[str, Any]:
    """A new child object dict (no creationTimestamp: the store stamps it with the virtual clock)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    if generate_name is not None:
        metadata["generateName"] = generate_name
    metadata["labels"] = dict(sorted(labels.items()))
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    metadata["ownerReferences"] = [owner_reference(owner)]
    obj: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": copy.deepcopy(dict(spec)),
    }
    if kind == "Pod":
        obj["status"] = {"phase": "Pending"}
    return obj


# ---------------------------------------------------------------------------------------------
# Pod templates


def template_parts(template: Mapping[str, Any], *, path: str) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """Deep copies of a pod template's labels, annotations and spec, validated.

    `path` names the template field (for example `spec.template`), so errors point at it.
    """
    metadata = opt_map(template, "metadata", path=path)
    labels = string_map(opt_map(metadata, "labels", path=f"{path}.metadata"), field=f"{path}.metadata.labels")
    annotations = string_map(
        opt_map(metadata, "annotations", path=f"{path}.metadata"), field=f"{path}.metadata.annotations"
    )
    spec = req_map(template, "spec", path=path, hint="give the pod template a `spec` with containers")
    containers = opt_list(spec, "containers", path=f"{path}.spec")
    if not containers:
        raise InvalidSpec(f"{path}.spec.containers", "must list at least one container", "add a container")
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            raise InvalidSpec(f"{path}.spec.containers[{index}]", "must be a mapping", "describe the container")
    return labels, annotations, copy.deepcopy(dict(spec))


def required_template(owner_part: Mapping[str, Any], key: str, *, path: str) -> Mapping[str, Any]:
    """The pod template at `owner_part[key]`, required."""
    return req_map(owner_part, key, path=path, hint="add a pod template with metadata and spec.containers")


def container_names(spec: Mapping[str, Any]) -> list[str]:
    result: list[str] = []
    for container in spec.get("containers") or ():
        if isinstance(container, Mapping) and isinstance(container.get("name"), str):
            result.append(container["name"])
    return result


def build_pod(
    *,
    owner: model.Obj,
    name: str,
    generate_name: str | None,
    uid: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: Mapping[str, Any],
) -> dict[str, Any]:
    """A Pending pod owned by `owner`, in the owner's namespace."""
    return new_object(
        api_version="v1",
        kind="Pod",
        name=name,
        namespace=namespace_of(owner),
        uid=uid,
        owner=owner,
        labels=labels,
        annotations=annotations,
        spec=spec,
        generate_name=generate_name,
    )


def unique_name(*, prefix: str, taken: set[str], names: model.NameSource, scope: str) -> str:
    """`prefix` plus a generated suffix not already in `taken` (which is updated)."""
    while True:
        candidate = prefix + names.suffix(scope=scope)
        if candidate not in taken:
            taken.add(candidate)
            return candidate


# ---------------------------------------------------------------------------------------------
# Pod state


class PodState(enum.StrEnum):
    """How a controller sees one of its pods."""

    ACTIVE = "active"  # Pending or Running, not being deleted
    TERMINATING = "terminating"  # has a deletionTimestamp (the simulator's Releasing)
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


def pod_phase(pod: model.Obj) -> str:
    value = status_of(pod).get("phase")
    return value if isinstance(value, str) else "Pending"


def pod_state(pod: model.Obj) -> PodState:
    """Classify a pod: terminal phases first, then deletion in progress, else active."""
    phase = pod_phase(pod)
    if phase == "Succeeded":
        return PodState.SUCCEEDED
    if phase == "Failed":
        return PodState.FAILED
    if meta(pod).get("deletionTimestamp") or phase == "Releasing":
        return PodState.TERMINATING
    return PodState.ACTIVE


def pod_running(pod: model.Obj) -> bool:
    """Running and not being deleted (the simulator has no readiness probes: running is ready)."""
    return pod_state(pod) is PodState.ACTIVE and pod_phase(pod) == "Running"


def terminal(pod: model.Obj) -> bool:
    return pod_state(pod) in (PodState.SUCCEEDED, PodState.FAILED)


# ---------------------------------------------------------------------------------------------
# Conditions and status


def condition_true(obj: model.Obj, condition_type: str) -> bool:
    for condition in status_of(obj).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return condition.get("status") in ("True", True)
    return False


def condition(condition_type: str, *, reason: str, message: str) -> dict[str, str]:
    return {"type": condition_type, "status": "True", "reason": reason, "message": message}


def status_change(owner: model.Obj, new_status: Mapping[str, Any]) -> model.Obj | None:
    """`new_status` when it differs from the owner's current status, else None."""
    return None if dict(status_of(owner)) == dict(new_status) else dict(new_status)


# ---------------------------------------------------------------------------------------------
# Error guard


def owner_event(owner: model.Obj, type_: str, reason: str, message: str) -> model.Event:
    """An event a controller reports about the object it reconciles."""
    return model.Event(
        type=type_,
        reason=reason,
        message=message,
        kind=kind_of(owner),
        namespace=namespace_of(owner),
        name=name_of(owner),
    )


class GuardedController(abc.ABC):
    """Base of the emulated controllers: `reconcile` runs the kind's `_reconcile` under `guarded`,
    so a malformed spec always comes back as `Reconciliation.errors` (the `model.Controller` contract)."""

    kind: str

    def reconcile(
        self, *, owner: model.Obj, children: Sequence[model.Obj], names: model.NameSource, now: float | None = None
    ) -> model.Reconciliation:
        return guarded(owner, lambda: self._reconcile(owner, children, names))

    @abc.abstractmethod
    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation: ...


def guarded(owner: model.Obj, body: Callable[[], model.Reconciliation]) -> model.Reconciliation:
    """Run a controller body; spec problems come back as `Reconciliation.errors`, never raised.

    Order of checks: the owner must be a named mapping with a uid (the store assigns uids), then
    the body runs; `InvalidSpec` becomes a SpecError for its field, and any other error raised by
    malformed input becomes a SpecError naming the object as a whole.
    """
    kind = kind_of(owner) if isinstance(owner, Mapping) else "?"
    name = name_of(owner) if isinstance(owner, Mapping) else "?"
    namespace = namespace_of(owner) if isinstance(owner, Mapping) else "?"

    def error(field: str, message: str, hint: str) -> model.Reconciliation:
        spec_error = model.SpecError(
            kind=kind or "?", namespace=namespace, name=name or "?", field=field, message=message, hint=hint
        )
        return model.Reconciliation(errors=(spec_error,))

    if not isinstance(owner, Mapping) or not name:
        return error("metadata.name", "is required but missing", "give the object a metadata.name")
    if not uid_of(owner):
        return error("metadata.uid", "is missing", "the simulator store must assign a uid before reconciling")
    try:
        return body()
    except InvalidSpec as exc:
        return error(exc.field, exc.message, exc.hint)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        return error("(object)", f"cannot be read: {exc!r}", "check the manifest against the kind's schema")
