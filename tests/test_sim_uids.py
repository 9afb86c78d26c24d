"""The uids the simulated cluster gives the objects it stores: a UUID shape that starts with the creation
sequence number, so objects created at the same instant order by uid as they came in. They are numbered
in the order of creation: objects that come with a uid keep it and take no number, and an object whose
create-at time is still to come is numbered when it comes.
"""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

from kai.core.session import SchedulerConfig
from kai.sim.engine import Simulation, _uid
from kai.sim.loader import load_paths


def _pod(name: str, annotations: dict[str, str] | None = None, uid: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team"}
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
    }


def test_the_input_is_numbered_in_the_order_it_is_created(tmp_path: pathlib.Path) -> None:
    names = [f"p{i:03d}" for i in range(100)]
    docs = []
    for name in names:
        if name == "p005":
            docs.append(_pod(name, uid="given-uid"))
        elif name == "p007":
            docs.append(_pod(name, annotations={"sim.kai.scheduler/create-at": "10s"}))
        else:
            docs.append(_pod(name))
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    loaded = load_paths([str(path)])
    assert not loaded.errors
    sim = Simulation(loaded.objects, config=SchedulerConfig(actions=("allocate",)))
    now = [name for name in names if name not in ("p005", "p007")]
    assert {name: sim.pods[f"team/{name}"].pod.meta.uid for name in now} == {
        name: _uid(i + 1, f"team/{name}") for i, name in enumerate(now)
    }
    assert sim.pods["team/p005"].pod.meta.uid == "given-uid"
    assert "team/p007" not in sim.pods
    sim.run(cycles=None, until_idle=True, max_time=60.0)
    assert sim.pods["team/p007"].pod.meta.uid == _uid(len(now) + 1, "team/p007")
