"""A minimal object store that drives the emulated controllers the way `kai sim`'s store will.

Test-only fake at the boundary: it assigns uids and creation times to applied objects,
reconciles every controlled object until nothing changes, applies creates, deletes (immediate,
with garbage collection of dependents) and status updates, and lets tests play kubelet and
scheduler by setting pod phases or removing pods.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kai.sim import controllers
from kai.sim.controllers import model

MANIFESTS = Path(__file__).parent / "manifests"


def load(name: str) -> list[dict[str, Any]]:
    """The documents of a manifest file under tests/sim_controllers/manifests."""
    with (MANIFESTS / name).open() as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


class ConvergenceError(AssertionError):
    pass


class MiniStore:
    """Objects by uid; pods are Pending until a test says otherwise."""

    def __init__(self, *, seed: str = "test") -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.names = controllers.SeededNameSource(seed=seed)
        self.errors: list[model.SpecError] = []
        self.events: list[model.Event] = []
        self._serial = 0

    # -- loading -------------------------------------------------------------------------------

    def apply(self, docs: Iterable[Mapping[str, Any]]) -> None:
        for doc in docs:
            obj = copy.deepcopy(dict(doc))
            meta = obj.setdefault("metadata", {})
            if meta.get("namespace") is None and obj.get("kind") not in ("Queue", "Node", "PriorityClass"):
                meta["namespace"] = "default"
            meta.setdefault("uid", f"uid-{str(obj.get('kind')).lower()}-{meta.get('name')}")
            meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            self._add(obj)

    def _add(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (obj.get("kind"), meta.get("namespace"), meta.get("name"))
        for other in self.objects.values():
            other_key = (other.get("kind"), other["metadata"].get("namespace"), other["metadata"].get("name"))
            assert other_key != key, f"name collision: {key}"
        self._serial += 1
        meta.setdefault("creationTimestamp", f"2026-01-01T00:{self._serial // 60:02d}:{self._serial % 60:02d}Z")
        self.objects[meta["uid"]] = obj

    # -- reconciling ---------------------------------------------------------------------------

    def children(self, owner: Mapping[str, Any]) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        return [
            obj
            for obj in self.objects.values()
            if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences", ()))
        ]

    def settle(self, *, max_passes: int = 60, now: float | None = None) -> None:
        """Reconcile every controlled object until a whole pass changes nothing (at virtual time `now`)."""
        for _ in range(max_passes):
            changed = False
            for uid in sorted(self.objects, key=lambda u: (str(self.objects[u]["kind"]), u)):
                owner = self.objects.get(uid)
                if owner is None:
                    continue
                controller = controllers.controller_for(owner)
                if controller is None:
                    continue
                result = controller.reconcile(owner=owner, children=self.children(owner), names=self.names, now=now)
                self.errors.extend(e for e in result.errors if e not in self.errors)
                self.events.extend(result.events)
                for ref in result.delete:
                    changed |= self.delete(ref.uid)
                for obj in result.create:
                    self._add(copy.deepcopy(dict(obj)))
                    changed = True
                if result.status is not None:
                    owner["status"] = copy.deepcopy(dict(result.status))
                    changed = True
            if not changed:
                return
        raise ConvergenceError("controllers did not converge")

    def delete(self, uid: str) -> bool:
        """Remove an object and, recursively, everything it owns. True if something was removed."""
        if uid not in self.objects:
            return False
        owned = [o["metadata"]["uid"] for o in self.children(self.objects[uid])]
        del self.objects[uid]
        for child in owned:
            self.delete(child)
        return True

    # -- playing kubelet and scheduler ---------------------------------------------------------

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return sorted((o for o in self.objects.values() if o["kind"] == kind), key=lambda o: o["metadata"]["name"])

    def pods(self) -> list[dict[str, Any]]:
        return self.of_kind("Pod")

    def pod_names(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods()]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        for obj in self.objects.values():
            if obj["kind"] == kind and obj["metadata"]["name"] == name:
                return obj
        raise KeyError(f"{kind}/{name}")

    def set_phase(self, name: str, phase: str) -> None:
        pod = self.get("Pod", name)
        pod["status"] = {"phase": phase}
        if phase == "Running":
            pod["spec"]["nodeName"] = "node-0"

    def run_all(self) -> None:
        """Bind and start every pending pod, then let controllers react."""
        for pod in self.pods():
            if pod["status"].get("phase") == "Pending":
                self.set_phase(pod["metadata"]["name"], "Running")
        self.settle()

    def remove_pod(self, name: str) -> None:
        """An evicted pod whose grace period ended: gone from the store."""
        self.delete(self.get("Pod", name)["metadata"]["uid"])

    def terminate_pod(self, name: str) -> None:
        """An evicted pod inside its grace period (Releasing)."""
        self.get("Pod", name)["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"


def owner_of(obj: Mapping[str, Any]) -> tuple[str, str, bool]:
    (ref,) = obj["metadata"]["ownerReferences"]
    return ref["kind"], ref["name"], ref["controller"]
