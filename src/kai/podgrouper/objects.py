"""Typed, read-only access to raw Kubernetes objects (dicts parsed from YAML or JSON).

The pod grouper works on the objects exactly as the API server or a YAML file hands them over, so
that any workload kind, including CRDs we have no model for, can be grouped. This module keeps the
``obj["metadata"]["labels"]`` plumbing and its type checks in one place. Pure, no side effects.

A field of the wrong type (``replicas: "two"``) raises :class:`InvalidObjectError`; the entry point
``grouping.group_pod`` turns it into a user-facing grouping error, so it never escapes the package.
"""

from collections.abc import Mapping, Sequence
from typing import Any

RawObject = Mapping[str, Any]

_EMPTY: Mapping[str, Any] = {}


class InvalidObjectError(ValueError):
    """A field of a workload object has the wrong type; the message names the field and the object."""


def metadata(obj: RawObject) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


def name(obj: RawObject) -> str:
    return str(metadata(obj).get("name") or "")


def namespace(obj: RawObject) -> str:
    return str(metadata(obj).get("namespace") or "")


def uid(obj: RawObject) -> str:
    return str(metadata(obj).get("uid") or "")


def api_version(obj: RawObject) -> str:
    return str(obj.get("apiVersion") or "")


def kind(obj: RawObject) -> str:
    return str(obj.get("kind") or "")


def _string_map(obj: RawObject, field: str) -> Mapping[str, str]:
    value = metadata(obj).get(field)
    if not isinstance(value, Mapping):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def labels(obj: RawObject) -> Mapping[str, str]:
    return _string_map(obj, "labels")


def annotations(obj: RawObject) -> Mapping[str, str]:
    return _string_map(obj, "annotations")


def owner_references(obj: RawObject) -> tuple[Mapping[str, Any], ...]:
    refs = metadata(obj).get("ownerReferences")
    if refs is None or not isinstance(refs, Sequence) or isinstance(refs, str):
        return ()
    return tuple(ref for ref in refs if isinstance(ref, Mapping))


def group_of(api_version_value: str) -> str:
    """The API group of an apiVersion: ``"apps/v1"`` -> ``"apps"``, core ``"v1"`` -> ``""``."""
    group, sep, _version = api_version_value.rpartition("/")
    return group if sep else ""


def version_of(api_version_value: str) -> str:
    return api_version_value.rpartition("/")[2]


def group_kind_key(obj: RawObject) -> str:
    """The registry key of an object's type, ``"<group>/<Kind>"``: ``"ray.io/RayCluster"``, ``"/Pod"``."""
    return f"{group_of(api_version(obj))}/{kind(obj)}"


def describe(obj: RawObject) -> str:
    """``Kind namespace/name`` as users see it in kubectl output and events."""
    ns = namespace(obj)
    return f"{kind(obj) or 'object'} {ns + '/' if ns else ''}{name(obj)}"


def get(obj: Mapping[str, Any], *path: str) -> Any:
    """The value at ``path`` below ``obj``, or None when any step is missing or not a mapping."""
    current: Any = obj
    for step in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(step)
    return current


def _where(path: Sequence[str], owner: RawObject | None, at: str) -> str:
    field = ".".join((at, *path) if at else path)
    return f"{field} of {describe(owner)}" if owner is not None else field


def get_int(obj: Mapping[str, Any], *path: str, owner: RawObject | None = None, at: str = "") -> int | None:
    """An integer field, or None when absent.

    ``owner`` names the object and ``at`` the path of ``obj`` inside it in error messages.
    """
    value = get(obj, *path)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObjectError(f"{_where(path, owner, at)} must be an integer, got {value!r}")
    return value


def get_str(obj: Mapping[str, Any], *path: str, owner: RawObject | None = None, at: str = "") -> str | None:
    value = get(obj, *path)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidObjectError(f"{_where(path, owner, at)} must be a string, got {value!r}")
    return value


def get_bool(obj: Mapping[str, Any], *path: str, owner: RawObject | None = None, at: str = "") -> bool | None:
    value = get(obj, *path)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidObjectError(f"{_where(path, owner, at)} must be true or false, got {value!r}")
    return value


def get_map(
    obj: Mapping[str, Any], *path: str, owner: RawObject | None = None, at: str = ""
) -> Mapping[str, Any] | None:
    value = get(obj, *path)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidObjectError(f"{_where(path, owner, at)} must be a mapping, got {value!r}")
    return value


def get_list(
    obj: Mapping[str, Any], *path: str, owner: RawObject | None = None, at: str = ""
) -> tuple[Mapping[str, Any], ...] | None:
    """A list of mappings (e.g. ``spec.workerGroupSpecs``), or None when absent."""
    value = get(obj, *path)
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidObjectError(f"{_where(path, owner, at)} must be a list, got {value!r}")
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            where = _where((*path[:-1], f"{path[-1]}[{index}]"), owner, at)
            raise InvalidObjectError(f"{where} must be a mapping, got {item!r}")
    return items


def parse_int_text(text: str) -> int | None:
    """A base-10 integer label or annotation value (``"3"``, ``"-1"``), or None if it is not one."""
    stripped = text.strip()
    digits = stripped[1:] if stripped[:1] in "+-" else stripped
    if not digits.isascii() or not digits.isdigit():
        return None
    return int(stripped)
