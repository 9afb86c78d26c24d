"""LeaderWorkerSet emulation: leader StatefulSet, per-group worker StatefulSets, group restarts."""

from __future__ import annotations

from typing import Any

from kai.sim.controllers import names
from kai.sim.engine import Simulation

from .cluster import (
    events,
    get,
    key,
    load,
    owner_of,
    phases,
    pod,
    pod_names,
    pods,
    refusal,
    remove,
    settle,
    simulate,
    uid,
)

LWS = "leaderworkerset-sample"
GROUP_0 = (f"{LWS}-0", f"{LWS}-0-1", f"{LWS}-0-2")
GROUP_1 = (f"{LWS}-1", f"{LWS}-1-1", f"{LWS}-1-2")


def lws_docs(**template_changes: object) -> list[dict[str, Any]]:
    docs = load("leaderworkerset.yaml")
    docs[0]["spec"]["leaderWorkerTemplate"].update(template_changes)
    return docs


def lws_cluster(**template_changes: object) -> Simulation:
    return simulate(lws_docs(**template_changes))


def uids(sim: Simulation) -> dict[str, str]:
    return {p["metadata"]["name"]: uid(p) for p in pods(sim)}


def test_two_groups_of_three_pods_with_lws_names() -> None:
    sim = lws_cluster()

    assert events(sim, "InvalidSpec") == []
    assert pod_names(sim) == [*GROUP_0, *GROUP_1]
    assert set(phases(sim).values()) == {"Running"}
    leader_sts = get(sim, "StatefulSet", LWS)
    assert owner_of(leader_sts) == ("LeaderWorkerSet", LWS, True)
    worker_sts = get(sim, "StatefulSet", f"{LWS}-1")
    assert owner_of(worker_sts) == ("Pod", f"{LWS}-1", True)
    assert worker_sts["metadata"]["ownerReferences"][0]["uid"] == uid(pod(sim, f"{LWS}-1"))
    assert worker_sts["spec"]["replicas"] == 2
    assert owner_of(pod(sim, f"{LWS}-1")) == ("StatefulSet", LWS, True)
    assert owner_of(pod(sim, f"{LWS}-1-2")) == ("StatefulSet", f"{LWS}-1", True)


def test_leader_and_worker_labels() -> None:
    sim = lws_cluster()
    group_key = names.sha1_hex(f"default/{LWS}-1")

    leader = pod(sim, f"{LWS}-1")
    labels = leader["metadata"]["labels"]
    assert labels["leaderworkerset.sigs.k8s.io/name"] == LWS
    assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert labels["leaderworkerset.sigs.k8s.io/group-index"] == "1"
    assert labels["leaderworkerset.sigs.k8s.io/group-key"] == group_key
    assert labels["role"] == "leader"
    assert leader["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] == "3"
    assert leader["spec"]["schedulerName"] == "kai-scheduler"

    worker = pod(sim, f"{LWS}-1-2")
    labels = worker["metadata"]["labels"]
    assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == "2"
    assert labels["leaderworkerset.sigs.k8s.io/group-index"] == "1"
    assert labels["leaderworkerset.sigs.k8s.io/group-key"] == group_key
    assert labels["role"] == "worker"
    assert worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] == f"{LWS}-1"
    assert (
        labels["leaderworkerset.sigs.k8s.io/template-revision-hash"]
        == (leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/template-revision-hash"])
    )


def test_losing_a_worker_recreates_the_whole_group() -> None:
    sim = lws_cluster()
    before = uids(sim)

    sim.delete_pod(key(sim, f"{LWS}-0-2"), reason="evicted")
    sim.step()  # the worker StatefulSet restarts the group: it deletes the leader
    assert phases(sim)[f"{LWS}-0"] == "Running" and "deletionTimestamp" in pod(sim, f"{LWS}-0")["metadata"]
    assert sim.step() is False  # while the leader terminates nothing changes, though the request stands

    remove(sim, f"{LWS}-0")  # gone: its worker StatefulSet goes with it, by garbage collection
    assert get(sim, "StatefulSet", f"{LWS}-0")["metadata"]["ownerReferences"][0]["uid"] == uid(pod(sim, f"{LWS}-0"))
    settle(sim)

    after = uids(sim)
    assert sorted(after) == sorted(before)
    for name in GROUP_0:
        assert after[name] != before[name], name
    for name in GROUP_1:
        assert after[name] == before[name], name
    assert set(phases(sim).values()) == {"Running"}


def test_restart_policy_none_recreates_only_the_lost_worker() -> None:
    sim = lws_cluster(restartPolicy="None")
    before = uids(sim)

    remove(sim, f"{LWS}-0-2")
    settle(sim)

    after = uids(sim)
    assert sorted(after) == sorted(before)
    changed = sorted(name for name in after if after[name] != before[name])
    assert changed == [f"{LWS}-0-2"]


def test_leader_ready_startup_waits_for_the_leader() -> None:
    docs = load("leaderworkerset.yaml")
    docs[0]["spec"]["startupPolicy"] = "LeaderReady"
    sim = simulate(docs)
    assert phases(sim) == {f"{LWS}-0": "Running", f"{LWS}-1": "Running"}  # the workers wait

    sim.step()
    assert pod_names(sim) == [*GROUP_0, *GROUP_1]


def test_size_one_has_leaders_only_and_missing_worker_template_is_an_error() -> None:
    sim = lws_cluster(size=1)
    settle(sim)
    assert pod_names(sim) == [f"{LWS}-0", f"{LWS}-1"]

    docs = load("leaderworkerset.yaml")
    del docs[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    (error,) = refusal(docs)
    assert error.startswith(f"LeaderWorkerSet {LWS}: spec.leaderWorkerTemplate.workerTemplate: "), error
