"""The emulated controllers driven the way `kai sim` drives them, read back the way a user sees them.

Manifests go through the loader into the simulator's store (`kai.sim.engine.Simulation`); each
cycle runs the controllers, the pod grouper and the scheduler. Objects are read as the API
server would return them (a pod with its phase, node and deletionTimestamp). Playing the kubelet
uses the store's own operations (`Simulation.finish_pod`, `Simulation.delete_pod`); nothing here
changes the store any other way.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kai.api.fields import parse_timestamp
from kai.cli.main import main
from kai.core.session import SchedulerConfig
from kai.sim import reconcile
from kai.sim.engine import EventRecord, Simulation
from kai.sim.loader import load_paths

MANIFESTS = Path(__file__).parent / "manifests"
MAX_CYCLES = 200  # far more than any test needs; a test that hits it has found a loop


def load(name: str) -> list[dict[str, Any]]:
    """The documents of a manifest file under tests/sim_controllers/manifests."""
    with (MANIFESTS / name).open() as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def queue(name: str) -> dict[str, Any]:
    """A top-level Queue without quota or limit, for workloads that name a queue of their own."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resources": {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}},
    }


def _write(docs: Iterable[Mapping[str, Any]], directory: str) -> str:
    path = Path(directory) / "input.yaml"
    path.write_text(yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False))
    return str(path)


def simulate(docs: Iterable[Mapping[str, Any]], *, cycles: int = 1, start: str | None = None) -> Simulation:
    """The embedded cluster after `kai sim -f <docs> --cycles <cycles> [--start-time <start>]`."""
    with tempfile.TemporaryDirectory() as directory:
        loaded = load_paths([_write(docs, directory)])
    assert loaded.errors == [], [str(e) for e in loaded.errors]
    sim = Simulation(loaded.objects, config=SchedulerConfig(), start_time=parse_timestamp(start) if start else None)
    for _ in range(cycles):
        sim.step()
    return sim


def refusal(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The error lines `kai sim` refuses the input with (exit status 2), without the file and document."""
    with tempfile.TemporaryDirectory() as directory:
        path = _write(docs, directory)
        result = CliRunner().invoke(main, ["sim", "-f", path])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    return [re.sub(f"^error: {re.escape(path)}: document [0-9]+: ", "", line) for line in lines]


def settle(sim: Simulation) -> None:
    """Run cycles until one changes nothing and no timed transition (a grace period, a duration) is left."""
    sim.run(cycles=None, until_idle=True, max_time=sim.now - sim.start + MAX_CYCLES * sim.config.schedule_period)


def run_until(sim: Simulation, moment: float) -> None:
    """Run cycles as `kai sim --until-idle` does (idle time skipped to the next timed event), the last
    one starting at `moment` at the latest."""
    sim.run(cycles=None, until_idle=True, max_time=moment - sim.start + sim.config.schedule_period)


# -- reading -------------------------------------------------------------------------------------


def pods(sim: Simulation) -> list[dict[str, Any]]:
    """Every pod as the API server returns it, by name."""
    return sorted((reconcile.pod_view(sim, key) for key in sim.pods), key=lambda p: p["metadata"]["name"])


def pod_names(sim: Simulation) -> list[str]:
    return [p["metadata"]["name"] for p in pods(sim)]


def key(sim: Simulation, name: str) -> str:
    """The store key (namespace/name) of the one pod called `name`."""
    (found,) = [k for k, p in sim.pods.items() if p.pod.name == name]
    return found


def pod(sim: Simulation, name: str) -> dict[str, Any]:
    return reconcile.pod_view(sim, key(sim, name))


def phases(sim: Simulation) -> dict[str, str]:
    return {p["metadata"]["name"]: p["status"]["phase"] for p in pods(sim)}


def of_kind(sim: Simulation, kind: str) -> list[Mapping[str, Any]]:
    """The controller-managed objects of a kind (Job, ReplicaSet, RayCluster, ...), by name."""
    return sorted((w.raw for w in sim.workloads.values() if w.kind == kind), key=lambda o: o["metadata"]["name"])


def get(sim: Simulation, kind: str, name: str) -> Mapping[str, Any]:
    (found,) = [o for o in of_kind(sim, kind) if o["metadata"]["name"] == name]
    return found


def owner_of(obj: Mapping[str, Any]) -> tuple[str, str, bool]:
    (ref,) = obj["metadata"]["ownerReferences"]
    return ref["kind"], ref["name"], ref["controller"]


def uid(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def events(sim: Simulation, reason: str) -> list[EventRecord]:
    return [e for e in sim.totals.events if e.reason == reason]


# -- playing the kubelet -------------------------------------------------------------------------


def finish(sim: Simulation, name: str, *, failed: bool = False) -> None:
    """The pod's containers exit (Succeeded, or Failed); its controller sees it in the next cycle."""
    sim.finish_pod(key(sim, name), failed=failed)


def remove(sim: Simulation, name: str) -> None:
    """Delete the pod and run cycles until it is gone: a running pod after its grace period."""
    gone = uid(pod(sim, name))
    sim.delete_pod(key(sim, name), reason="deleted by the test")
    for _ in range(MAX_CYCLES):
        if all(uid(p) != gone for p in pods(sim)):
            return
        sim.step()
    raise AssertionError(f"pod {name} was never removed")
