"""Strict field validation, as `kubectl apply` gets it from the API server: an unknown field is an error.

Why: a misspelled field (`quotaa: 4`, `overQuotaWieght`, `schedulerNmae`) is silently dropped by a
lenient reader and the object then does something else than its author meant. The API server refuses
such an object (server-side strict field validation), and so does kai, for every kind whose schema it
knows:

* Kubernetes built-in kinds (Pod, Node, Deployment, Job, ...) against the pinned Kubernetes models of
  lightkube-models (as `kai.api.model_fields` ships their fields), every field at every depth;
* kai's Queue and PodGroup against their CRD schemas (`kai.deploy`), fields and JSON types;
* kinds of other operators (RayCluster, PyTorchJob, ...) have no schema here: only their metadata is
  checked.

Label and annotation keys are free in Kubernetes, but keys under our prefixes (`kai.scheduler/`,
`sim.kai.scheduler/`) are ours: an unknown one is an error with a did-you-mean. An unprefixed key that
is a near miss of one of ours (`gpu-fracton`) is a warning, since Kubernetes accepts it. Keys KAI
defines but kai does not act on are a warning that says so.

Pure: raw mappings and schemas in, errors and warnings out.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from kai.api import model_fields
from kai.api.errors import InputError, InputWarning, Source
from kai.api.fields import is_mapping

# (group, kind) -> lightkube model ("module.Class") holding the kind's full schema
BUILTIN_MODELS: Mapping[tuple[str, str], str] = {
    ("", "Pod"): "core_v1.Pod",
    ("", "Node"): "core_v1.Node",
    ("", "Namespace"): "core_v1.Namespace",
    ("", "ConfigMap"): "core_v1.ConfigMap",
    ("scheduling.k8s.io", "PriorityClass"): "scheduling_v1.PriorityClass",
    ("apps", "Deployment"): "apps_v1.Deployment",
    ("apps", "ReplicaSet"): "apps_v1.ReplicaSet",
    ("apps", "StatefulSet"): "apps_v1.StatefulSet",
    ("batch", "Job"): "batch_v1.Job",
    ("batch", "CronJob"): "batch_v1.CronJob",
}
OBJECT_META_MODEL = "meta_v1.ObjectMeta"
MODEL_ROOTS: tuple[str, ...] = (*BUILTIN_MODELS.values(), OBJECT_META_MODEL)  # what `model_fields` ships

OUR_PREFIXES = ("kai.scheduler/", "sim.kai.scheduler/")
# Label and annotation keys under our prefixes that kai reads or writes.
KAI_KEYS: frozenset[str] = frozenset(
    {
        "kai.scheduler/queue",
        "kai.scheduler/preemptibility",
        "kai.scheduler/subgroup-name",
        "kai.scheduler/task-priority",
        "kai.scheduler/node-pool",
        "kai.scheduler/top-owner-metadata",
        "kai.scheduler/topology",
        "kai.scheduler/topology-required-placement",
        "kai.scheduler/topology-preferred-placement",
        "kai.scheduler/segment-size",
        "kai.scheduler/segment-topology-required-placement",
        "kai.scheduler/segment-topology-preferred-placement",
        "kai.scheduler/last-start-timestamp",
        "kai.scheduler/last-eviction-timestamp",
        "kai.scheduler/stale-podgroup-timestamp",
        "kai.scheduler/staleness-grace-period",
        "kai.scheduler/preemption-delay",
        "kai.scheduler/safe-to-consolidate",
        "sim.kai.scheduler/duration",
        "sim.kai.scheduler/create-at",
        "sim.kai.scheduler/tracking",
        "sim.kai.scheduler/lws-restart-policy",
        "sim.kai.scheduler/lws-worker-set",
    }
)
# Keys KAI Scheduler defines that kai accepts but does not act on.
KAI_ONLY_KEYS: Mapping[str, str] = {
    "kai.scheduler/accounting": "KAI's usage-accounting selector (time-based fairshare)",
    "kai.scheduler/batch-min-member": "KAI's batch minimum-member override",
    "kai.scheduler/numa-placement-observed": "KAI's NUMA placement record",
    "kai.scheduler/numa-placement-predicted": "KAI's NUMA placement record",
    "kai.scheduler/skip-podgrouper": "KAI's pod-grouper opt-out",
}
# Unprefixed keys of KAI's API; a near miss of one is probably a typo.
UNPREFIXED_KEYS: tuple[str, ...] = (
    "gpu-fraction",
    "gpu-memory",
    "gpu-fraction-num-devices",
    "gpu-fraction-container-name",
    "pod-group-name",
    "runai-gpu-group",
    "received-resource-type",
    "runai/queue",
    "priorityClassName",
)


class Shape(msgspec.Struct):
    """The expected shape of a value: an object with known fields, a list, a map, or a scalar."""

    kind: str  # "object" | "list" | "map" | "scalar" | "any"
    fields: dict[str, Shape] = msgspec.field(default_factory=dict)  # object: known fields
    item: Shape | None = None  # list items and map values
    types: tuple[str, ...] = ()  # scalar JSON types to check ("" for no check)
    strict_types: bool = False  # check scalar types (our CRDs); built-in kinds are checked for fields only


ANY = Shape(kind="any")


class Findings(msgspec.Struct, frozen=True, kw_only=True):
    errors: list[InputError]
    warnings: list[InputWarning]


# ------------------------------------------------------------------ schemas from lightkube models


def model_shapes(table: model_fields.Table) -> dict[str, Shape]:
    """The shape of every model of a `model_fields` table, by name (a model contained in several is one
    shape; one that contains itself ends)."""
    shapes = {name: Shape(kind="object") for name in table}

    def shape_of(kind: Any) -> Shape:
        if kind == "any":
            return ANY
        if "model" in kind:
            return shapes[kind["model"]]
        if "list" in kind:
            return Shape(kind="list", item=shape_of(kind["list"]))
        return Shape(kind="map", item=shape_of(kind["map"]))

    for name, fields in table.items():
        shapes[name].fields.update((key, shape_of(kind)) for key, kind in fields.items())
    return shapes


@functools.cache
def _shipped_shapes() -> dict[str, Shape]:
    return model_shapes(model_fields.shipped())


@functools.cache
def model_shape(path: str) -> Shape:
    """The shape of a lightkube model, such as "core_v1.Pod": from the shipped table for the models kai
    reads (`MODEL_ROOTS` and what they contain), else from lightkube-models itself."""
    shape = _shipped_shapes().get(path)
    if shape is None:
        shape = model_shapes(model_fields.from_lightkube([path]))[path]
    return shape


# ------------------------------------------------------------------ schemas from CRDs


def crd_shapes(crds: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Shape]:
    """(group, version, kind) -> shape, from CustomResourceDefinition manifests (openAPIV3Schema)."""
    out: dict[tuple[str, str, str], Shape] = {}
    for crd in crds:
        spec = crd["spec"]
        for version in spec["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            shape = _schema_shape(schema)
            shape.fields["metadata"] = model_shape(OBJECT_META_MODEL)  # the API server's own ObjectMeta
            out[(spec["group"], version["name"], spec["names"]["kind"])] = shape
    return out


def _schema_shape(schema: Mapping[str, Any]) -> Shape:
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string"):
        return ANY
    kind = schema.get("type")
    if kind == "object":
        if "properties" in schema:
            return Shape(kind="object", fields={k: _schema_shape(v) for k, v in schema["properties"].items()})
        extra = schema.get("additionalProperties")
        return Shape(kind="map", item=_schema_shape(extra) if isinstance(extra, Mapping) else ANY)
    if kind == "array":
        items = schema.get("items")
        return Shape(kind="list", item=_schema_shape(items) if isinstance(items, Mapping) else ANY)
    if kind in ("string", "integer", "number", "boolean"):
        return Shape(kind="scalar", types=(kind,), strict_types=True)
    return ANY


# ------------------------------------------------------------------ the check


def _type_problem(value: object, types: Sequence[str]) -> str | None:
    wanted = types[0]
    if wanted == "string" and isinstance(value, str):
        return None
    if wanted == "boolean" and isinstance(value, bool):
        return None
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if wanted == "integer" and not isinstance(value, bool) and integral:
        return None
    if wanted == "number" and not isinstance(value, bool) and isinstance(value, int | float):
        return None
    article = "an" if wanted == "integer" else "a"
    if isinstance(value, str):
        return f'must be {article} {wanted}, got "{value}" (a string: write it without quotes)'
    if isinstance(value, Mapping | list):
        return f"must be {article} {wanted}, got a {'mapping' if isinstance(value, Mapping) else 'list'}"
    return f"must be {article} {wanted}, got {value!r}"


def _near(word: str, candidates: Iterable[str], cutoff: float = 0.75) -> str | None:
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return match[0] if match else None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_fields(raw: Mapping[str, Any], shape: Shape) -> list[tuple[str, str]]:
    """(field path, problem) for every unknown field (and, where the shape says so, wrong JSON type)."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, Shape, str]] = [(raw, shape, "")]
    while stack:
        value, expected, path = stack.pop()
        kind = expected.kind
        if value is None or kind == "any":
            continue
        if kind == "object":
            if not is_mapping(value):
                problems.append((path, "must be a mapping"))
                continue
            fields = expected.fields
            for key, sub_value in value.items():
                name = key if type(key) is str else str(key)
                sub = fields.get(name)
                if sub is None:
                    guess = _near(name, fields)
                    hint = f"; did you mean {guess}?" if guess else ""
                    problems.append((_join(path, name), f"unknown field{hint}"))
                elif sub_value is not None and sub.kind != "any":
                    stack.append((sub_value, sub, f"{path}.{name}" if path else name))
        elif kind == "list":
            if not isinstance(value, list):
                problems.append((path, "must be a list"))
                continue
            item = expected.item
            if item is not None and item.kind != "any":
                for i, sub_value in enumerate(value):
                    stack.append((sub_value, item, f"{path}[{i}]"))
        elif kind == "map":
            if not is_mapping(value):
                problems.append((path, "must be a mapping"))
                continue
            item = expected.item
            if item is not None and item.kind != "any":
                for key, sub_value in value.items():
                    stack.append((sub_value, item, _join(path, str(key))))
        elif expected.strict_types:
            problem = _type_problem(value, expected.types)
            if problem is not None:
                problems.append((path, problem))
    problems.sort()  # the order of the walk does not show
    return problems


def metadata_maps(raw: Mapping[str, Any]) -> list[tuple[str, Mapping[Any, Any]]]:
    """(path, map) of every labels and annotations map under a `metadata` anywhere in the object."""
    out: list[tuple[str, Mapping[Any, Any]]] = []
    stack: list[tuple[Any, str]] = [(raw, "")]
    while stack:
        value, path = stack.pop()
        if is_mapping(value):
            meta = value.get("metadata")
            if is_mapping(meta):
                for key in ("labels", "annotations"):
                    found = meta.get(key)
                    if is_mapping(found):
                        out.append((_join(_join(path, "metadata"), key), found))
            for key, sub in value.items():
                if key != "metadata" and (isinstance(sub, list) or is_mapping(sub)):
                    stack.append((sub, _join(path, str(key))))
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                if isinstance(sub, list) or is_mapping(sub):
                    stack.append((sub, f"{path}[{i}]"))
    out.sort(key=lambda pm: pm[0])
    return out


@functools.lru_cache(maxsize=4096)
def _unprefixed_near_miss(key: str) -> str | None:
    """One of KAI's unprefixed keys that `key` is a near miss of (not equal to), or None (keys repeat a lot)."""
    if key in UNPREFIXED_KEYS:
        return None
    return _near(key, UNPREFIXED_KEYS, cutoff=0.85)


KeyErrors = list[tuple[str, str]]  # (path, problem)
KeyWarnings = list[tuple[str, str, str]]  # (path, reason, problem)


def check_keys(
    raw: Mapping[str, Any],
    extra_keys: frozenset[str] = frozenset(),
    *,
    maps: list[tuple[str, Mapping[Any, Any]]] | None = None,
) -> tuple[KeyErrors, KeyWarnings]:
    """Errors (path, problem) and warnings (path, reason, problem) about label and annotation keys
    (`maps`: the object's `metadata_maps`, when the caller has them already)."""
    errors: KeyErrors = []
    warnings: KeyWarnings = []
    known = KAI_KEYS | extra_keys
    for path, mapping in metadata_maps(raw) if maps is None else maps:
        for key in sorted(map(str, mapping)):
            finding = key_finding(key, known)
            if finding is None:
                continue
            reason, problem = finding
            if reason:
                warnings.append((f"{path}.{key}", reason, problem))
            else:
                errors.append((f"{path}.{key}", problem))
    return errors, warnings


def key_finding(key: str, known: frozenset[str]) -> tuple[str, str] | None:
    """What is wrong with one label or annotation key, as (warning reason, problem), with reason ""
    for an error; None for a key with nothing to say. `known`: KAI_KEYS and the configured extra keys."""
    if key in known:
        return None
    if key in KAI_ONLY_KEYS:
        return "NotSupported", f"{KAI_ONLY_KEYS[key]}: kai accepts it but does not act on it"
    if key.startswith(OUR_PREFIXES):
        guess = _near(key, known | set(KAI_ONLY_KEYS), cutoff=0.6)
        hint = f"; did you mean {guess}?" if guess else ""
        return "", f"unknown key under {key.split('/')[0]}/{hint}"
    guess = _unprefixed_near_miss(key)
    if guess is not None:
        return "UnknownKey", f"is not a key kai reads; did you mean {guess}?"
    return None


def check_document(
    raw: Mapping[str, Any],
    *,
    source: Source | None,
    shape: Shape | None,
    extra_keys: frozenset[str] = frozenset(),
    maps: list[tuple[str, Mapping[Any, Any]]] | None = None,
) -> Findings:
    """Every unknown field (against `shape`, None when the kind's schema is not known) and label or
    annotation key problem of one object, as errors and warnings naming the file, object and field."""
    kind = str(raw.get("kind", "object"))
    meta = raw.get("metadata")
    name = meta.get("name") if is_mapping(meta) else None
    name = name if isinstance(name, str) else ""
    problems = check_fields(raw, shape) if shape is not None else []
    if shape is None and is_mapping(meta):
        problems = [(_join("metadata", p), m) for p, m in check_fields(meta, model_shape(OBJECT_META_MODEL))]
    key_errors, key_warnings = check_keys(raw, extra_keys, maps=maps)
    errors = [
        InputError(source=source, kind=kind, name=name, field=path, problem=problem)
        for path, problem in [*problems, *key_errors]
    ]
    warnings = [
        InputWarning(source=source, kind=kind, name=name, field=path, reason=reason, problem=problem)
        for path, reason, problem in key_warnings
    ]
    return Findings(errors=errors, warnings=warnings)
