"""LeaderWorkerSet emulation: leader StatefulSet, per-group worker StatefulSets, group restarts."""

from __future__ import annotations

from kai.sim.controllers import names

from .ministore import MiniStore, load, owner_of

LWS = "leaderworkerset-sample"


def lws_store(**template_changes: object) -> MiniStore:
    docs = load("leaderworkerset.yaml")
    docs[0]["spec"]["leaderWorkerTemplate"].update(template_changes)
    store = MiniStore()
    store.apply(docs)
    store.settle()
    return store


def test_two_groups_of_three_pods_with_lws_names() -> None:
    store = lws_store()

    assert store.errors == []
    assert store.pod_names() == [
        f"{LWS}-0",
        f"{LWS}-0-1",
        f"{LWS}-0-2",
        f"{LWS}-1",
        f"{LWS}-1-1",
        f"{LWS}-1-2",
    ]
    leader_sts = store.get("StatefulSet", LWS)
    assert owner_of(leader_sts) == ("LeaderWorkerSet", LWS, True)
    worker_sts = store.get("StatefulSet", f"{LWS}-1")
    assert owner_of(worker_sts) == ("Pod", f"{LWS}-1", True)
    assert worker_sts["spec"]["replicas"] == 2
    assert owner_of(store.get("Pod", f"{LWS}-1")) == ("StatefulSet", LWS, True)
    assert owner_of(store.get("Pod", f"{LWS}-1-2")) == ("StatefulSet", f"{LWS}-1", True)


def test_leader_and_worker_labels() -> None:
    store = lws_store()
    group_key = names.sha1_hex(f"default/{LWS}-1")

    leader = store.get("Pod", f"{LWS}-1")
    labels = leader["metadata"]["labels"]
    assert labels["leaderworkerset.sigs.k8s.io/name"] == LWS
    assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0"
    assert labels["leaderworkerset.sigs.k8s.io/group-index"] == "1"
    assert labels["leaderworkerset.sigs.k8s.io/group-key"] == group_key
    assert labels["role"] == "leader"
    assert leader["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] == "3"
    assert leader["spec"]["schedulerName"] == "kai-scheduler"

    worker = store.get("Pod", f"{LWS}-1-2")
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
    store = lws_store()
    store.run_all()
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in store.pods()}

    store.remove_pod(f"{LWS}-0-2")
    store.settle()

    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in store.pods()}
    assert sorted(after) == sorted(before)
    for name in (f"{LWS}-0", f"{LWS}-0-1", f"{LWS}-0-2"):
        assert after[name] != before[name], name
    for name in (f"{LWS}-1", f"{LWS}-1-1", f"{LWS}-1-2"):
        assert after[name] == before[name], name


def test_restart_policy_none_recreates_only_the_lost_worker() -> None:
    store = lws_store(restartPolicy="None")
    store.run_all()
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in store.pods()}

    store.remove_pod(f"{LWS}-0-2")
    store.settle()

    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in store.pods()}
    changed = sorted(name for name in after if after[name] != before[name])
    assert changed == [f"{LWS}-0-2"]


def test_leader_ready_startup_waits_for_the_leader() -> None:
    docs = load("leaderworkerset.yaml")
    docs[0]["spec"]["startupPolicy"] = "LeaderReady"
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert store.pod_names() == [f"{LWS}-0", f"{LWS}-1"]

    store.set_phase(f"{LWS}-0", "Running")
    store.settle()
    assert store.pod_names() == [f"{LWS}-0", f"{LWS}-0-1", f"{LWS}-0-2", f"{LWS}-1"]


def test_size_one_has_leaders_only_and_missing_worker_template_is_an_error() -> None:
    assert lws_store(size=1).pod_names() == [f"{LWS}-0", f"{LWS}-1"]

    docs = load("leaderworkerset.yaml")
    del docs[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    store = MiniStore()
    store.apply(docs)
    store.settle()
    assert [e.field for e in store.errors] == ["spec.leaderWorkerTemplate.workerTemplate"]
