"""The contract between the simulator's object store and the emulated workload controllers.

A controller is a pure function of raw Kubernetes dicts: it sees one owner and the objects that
currently carry that owner's uid in their ownerReferences, and answers with a `Reconciliation`
(objects to create, objects to delete, the owner's new status, events, spec errors). The store
performs every effect; controllers never mutate their inputs, read a clock or draw randomness,
except through the injected `NameSource`, which makes generated names deterministic, and the
store's virtual time `now`, which a time-driven controller (CronJob) reads and answers with the
time it wants to be reconciled again (`requeue_at`, as controller-runtime's RequeueAfter).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

# A raw Kubernetes object as parsed from YAML or JSON (apiVersion, kind, metadata, spec, status).
Obj = Mapping[str, Any]


class NameSource(Protocol):
    """Deterministic generator for the random parts of names and for UIDs.

    Implementations must give the same sequence of answers for the same sequence of calls, so a
    simulation run is reproducible. `scope` is normally the owner's uid: sequences of different
    owners are then independent of the order in which the store reconciles them.
    """

    def suffix(self, *, scope: str, length: int = 5) -> str:
        """Return the next random-looking suffix (Kubernetes `generateName` alphabet) for `scope`."""
        ...

    def uid(self, *, scope: str) -> str:
        """Return the next UUID-shaped uid for an object created on behalf of `scope`."""
        ...


class ObjectRef(msgspec.Struct, frozen=True, kw_only=True):
    """Names one object the store must delete (as the API server would: pods get their grace period)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """A Kubernetes-style event a controller reports about its owner (shown in `kai sim` events)."""

    type: str  # "Normal" or "Warning"
    reason: str
    message: str
    kind: str
    namespace: str
    name: str

    @property
    def object_key(self) -> str:
        """The `Kind/namespace/name` form used by the simulator's JSON output."""
        return f"{self.kind}/{self.namespace}/{self.name}"


class SpecError(msgspec.Struct, frozen=True, kw_only=True):
    """A workload the controller cannot act on, naming the object, the field and how to fix it."""

    kind: str
    namespace: str
    name: str
    field: str
    message: str
    hint: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.field}: {self.message}. To fix: {self.hint}"


class Reconciliation(msgspec.Struct, frozen=True, kw_only=True):
    """What one reconcile pass asks the store to do.

    The store applies `delete` first, then `create` (in order), then replaces the owner's
    `status` when it is not None (None means unchanged). A controller never creates an object
    whose name one of its children still holds; a name freed by a delete is reused on a later
    pass. When `errors` is non-empty the other fields are empty: nothing is done for an invalid
    spec.
    """

    create: tuple[Obj, ...] = ()
    delete: tuple[ObjectRef, ...] = ()
    status: Obj | None = None
    events: tuple[Event, ...] = ()
    errors: tuple[SpecError, ...] = ()
    requeue_at: float | None = None  # virtual time (epoch seconds) at which to reconcile again

    @property
    def changed(self) -> bool:
        """True when applying this reconciliation changes the store."""
        return bool(self.create or self.delete or self.status is not None)


class Controller(Protocol):
    """An emulated workload controller (one per `group/Kind`)."""

    @property
    def kind(self) -> str:
        """The Kubernetes kind this controller owns (for example `RayCluster`)."""
        ...

    def reconcile(
        self, *, owner: Obj, children: Sequence[Obj], names: NameSource, now: float | None = None
    ) -> Reconciliation:
        """Compare `owner`'s spec with its current `children` and say what to change.

        `now` is the store's virtual time in epoch seconds (None: no time has passed yet, as when a
        spec is only checked); only time-driven controllers read it.

        Pure, no side effects; the store performs the returned creates, deletes and status update.
        Never raises: an unusable spec comes back as `Reconciliation.errors`.
        """
        ...
