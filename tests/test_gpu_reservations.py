"""Which reservation pods a cluster needs for its shared GPUs (kai.cluster.gpu_sharing.plan_reservations):
one per shared device in use, none for a device nobody uses, never two for one device."""

from __future__ import annotations

import pytest

from kai.cluster.gpu_sharing import DeviceUse, Release, Reservation, Reserve, device_env, plan_reservations


def reservation(
    name: str,
    group: str,
    *,
    node: str = "node-a",
    uuid: str | None = "GPU-1",
    created: float = 0.0,
    terminating: bool = False,
) -> Reservation:
    return Reservation(
        pod=f"kai-resource-reservation/{name}",
        node=node,
        group=group,
        uuid=uuid,
        terminating=terminating,
        created=created,
    )


CASES = {
    "a device in use gets a reservation pod": (
        {("node-a", "g1")},
        [],
        [Reserve(node="node-a", group="g1")],
    ),
    "a device with its reservation pod needs nothing": (
        {("node-a", "g1")},
        [reservation("r1", "g1")],
        [],
    ),
    "the last sharer gone, the reservation pod goes": (
        set(),
        [reservation("r1", "g1")],
        [Release(pod="kai-resource-reservation/r1", node="node-a", group="g1", why="no pod uses its device any more")],
    ),
    "of two reservation pods the one with the device UUID stays": (
        {("node-a", "g1")},
        [reservation("r1", "g1", uuid=None, created=1.0), reservation("r2", "g1", created=2.0)],
        [
            Release(
                pod="kai-resource-reservation/r1",
                node="node-a",
                group="g1",
                why="kai-resource-reservation/r2 already reserves it",
            )
        ],
    ),
    "a terminating reservation pod is neither kept nor deleted again": (
        {("node-a", "g1")},
        [reservation("r1", "g1", terminating=True)],
        [Reserve(node="node-a", group="g1")],
    ),
    "a reservation pod on another node than its group's is replaced": (
        {("node-b", "g1")},
        [reservation("r1", "g1", node="node-a")],
        [
            Release(pod="kai-resource-reservation/r1", node="node-a", group="g1", why="its group lives on node node-b"),
            Reserve(node="node-b", group="g1"),
        ],
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_plan_reservations(case: str) -> None:
    in_use, reservations, want = CASES[case]
    use = DeviceUse(keep=frozenset(in_use), need=frozenset(in_use))
    assert list(plan_reservations(use=use, reservations=reservations)) == want


def test_a_device_only_terminating_pods_hold_keeps_its_reservation_but_gets_no_new_one() -> None:
    held = frozenset({("node-a", "g1"), ("node-a", "g2")})
    use = DeviceUse(keep=held, need=frozenset())
    assert plan_reservations(use=use, reservations=[reservation("r1", "g1")]) == ()


def test_device_env_names_every_device_and_the_portion() -> None:
    assert device_env(["GPU-a", "GPU-b"], 0.5) == {
        "NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b",
        "GPU_PORTION": "0.50",
        "RUNAI_NUM_OF_GPUS": "0.50",
    }
    assert device_env(["0"], None) == {"NVIDIA_VISIBLE_DEVICES": "0"}
    assert device_env([], None) == {}
