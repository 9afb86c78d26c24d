"""PodGroup timing and consolidation settings: preemptionDelay, stalenessGracePeriod, safeToConsolidate.

What a user sees: the spec fields parse (bad values are input errors naming file, object and field),
the `kai.scheduler/*` annotations of a workload or its pods reach the PodGroup the pod grouper makes
(the workload's value wins, invalid values are ignored with a warning), the delay window counts
from the later of creation and the last eviction (which the simulator stamps on every evicted
PodGroup), and stalegangeviction names the grace period it used.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kai.api import podgroup as api_podgroup
from kai.api.fields import parse_timestamp
from kai.cli.main import main
from kai.core.model import Job
from kai.podgrouper import workload_settings
from tests.input_errors import sim_input_error

START = "2026-01-01T00:00:00Z"


def _pg(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "g", "namespace": "default", "creationTimestamp": START}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {"minMember": 1, "queue": "default-queue", **spec},
    }


# ------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("spec", "delay", "grace", "safe"),
    [
        ({}, None, None, True),
        ({"preemptionDelay": "5m"}, 300.0, None, True),
        ({"preemptionDelay": "0s"}, 0.0, None, True),
        ({"preemptionDelay": "1h30m"}, 5400.0, None, True),
        ({"stalenessGracePeriod": "-1s"}, None, -1.0, True),
        ({"stalenessGracePeriod": "90s"}, None, 90.0, True),
        ({"safeToConsolidate": False}, None, None, False),
        ({"safeToConsolidate": "false"}, None, None, False),
    ],
)
def test_spec_fields_parse(spec: dict[str, Any], delay: float | None, grace: float | None, safe: bool) -> None:
    pg = api_podgroup.parse_podgroup(_pg(spec), source=None)
    assert (pg.preemption_delay, pg.staleness_grace_period, pg.safe_to_consolidate) == (delay, grace, safe)


BAD_SPECS = [
    ({"preemptionDelay": "-5m"}, 'PodGroup g: spec.preemptionDelay: must not be negative, got "-5m"'),
    ({"preemptionDelay": "30"}, "PodGroup g: spec.preemptionDelay: must be a duration such as 90s"),
    ({"preemptionDelay": "soon"}, "PodGroup g: spec.preemptionDelay: must be a duration"),
    ({"stalenessGracePeriod": "1 minute"}, "PodGroup g: spec.stalenessGracePeriod: must be a duration"),
    # the CRD types it boolean, so the API server (and kai) refuses any string
    ({"safeToConsolidate": "maybe"}, 'PodGroup g: spec.safeToConsolidate: must be a boolean, got "maybe"'),
]


@pytest.mark.parametrize(
    ("spec", "message"), BAD_SPECS, ids=[m.split(": ")[1] + "-" + str(i) for i, (_, m) in enumerate(BAD_SPECS)]
)
def test_bad_spec_value_is_an_input_error(spec: dict[str, Any], message: str, tmp_path: pathlib.Path) -> None:
    assert message in sim_input_error(tmp_path, _pg(spec))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (30, "30s"),
        (300, "5m0s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (-1, "-1s"),
        (86400, "24h0m0s"),
    ],
)
def test_durations_print_as_go_does(seconds: float, text: str) -> None:
    assert api_podgroup.format_duration(seconds) == text


# ------------------------------------------------------------------------------------ the delay window


def _job(*, delay: float, creation: float, last_eviction: float | None) -> Job:
    return Job(
        index=0,
        namespace="default",
        name="j",
        uid="u",
        queue=0,
        queue_name="q",
        priority=100,
        priority_class_name="build",
        preemptible=False,
        can_preempt=True,
        min_member=1,
        podsets=(),
        tasks=(),
        creation=creation,
        last_start=None,
        stale_since=None,
        preemption_delay=delay,
        last_eviction=last_eviction,
    )


@pytest.mark.parametrize(
    ("delay", "last_eviction", "end"),
    [
        (0.0, None, None),  # no delay: may evict at once
        (600.0, None, 1600.0),  # anchored at creation
        (600.0, 1200.0, 1800.0),  # a later eviction re-arms the window
        (600.0, 500.0, 1600.0),  # an eviction before creation does not count
    ],
)
def test_delay_window_counts_from_creation_or_last_eviction(
    delay: float, last_eviction: float | None, end: float | None
) -> None:
    assert _job(delay=delay, creation=1000.0, last_eviction=last_eviction).preemption_delay_end == end


# ------------------------------------------------------------------------------------ pod grouper annotations

OWNER = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "trainer", "namespace": "default"}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-0", "namespace": "default"}}


def _with(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}


DELAY = api_podgroup.PREEMPTION_DELAY_ANNOTATION
GRACE = api_podgroup.STALENESS_GRACE_PERIOD_ANNOTATION
SAFE = api_podgroup.SAFE_TO_CONSOLIDATE_ANNOTATION


@pytest.mark.parametrize(
    ("owner", "pod", "expected", "warned"),
    [
        ({}, {}, (None, None, None), 0),
        ({DELAY: "5m"}, {}, (300.0, None, None), 0),
        ({}, {DELAY: "30s"}, (30.0, None, None), 0),
        ({DELAY: "5m"}, {DELAY: "30s"}, (300.0, None, None), 0),  # the workload's value wins
        ({DELAY: "30"}, {DELAY: "45s"}, (45.0, None, None), 1),  # unit-less: ignored, the pod's applies
        ({DELAY: "-1m"}, {}, (None, None, None), 1),  # negative delay: ignored
        ({GRACE: "-1s"}, {}, (None, -1.0, None), 0),  # negative grace: never evict as stale
        ({GRACE: "forever"}, {GRACE: "2m"}, (None, 120.0, None), 1),
        ({SAFE: "false"}, {SAFE: "true"}, (None, None, False), 0),
        ({}, {SAFE: "False"}, (None, None, False), 0),
        ({SAFE: "maybe"}, {}, (None, None, None), 1),
    ],
)
def test_annotations_of_owner_then_pod(
    owner: dict[str, str], pod: dict[str, str], expected: tuple[Any, Any, Any], warned: int
) -> None:
    settings = workload_settings.resolve(owners=(_with(OWNER, owner),), pod=_with(POD, pod))
    assert (settings.preemption_delay, settings.staleness_grace_period, settings.safe_to_consolidate) == expected
    assert len(settings.warnings) == warned
    for warning in settings.warnings:
        assert warning.reason == "InvalidAnnotation"
        assert "is ignored" in warning.message and "To fix:" in warning.message


# ------------------------------------------------------------------------------------ through `kai sim`

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1", "pods": "110"}},
}


def _pod(
    name: str,
    group: str | None,
    *,
    node: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    notes = {"pod-group-name": group} if group else {}
    notes.update(annotations or {})
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": START,
            "annotations": notes,
            "labels": labels or {},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    if node:
        doc["spec"]["nodeName"] = node
        doc["status"] = {"phase": "Running"}
    return doc


def _group(name: str, priority_class: str, *, created: str = START, **spec: Any) -> dict[str, Any]:
    # preemptible, so that the simulator's default-queue (quota 0) does not hold a preemptor back
    doc = _pg({"priorityClassName": priority_class, "preemptibility": "preemptible", **spec})
    doc["metadata"].update(name=name, creationTimestamp=created)
    return doc


def _sim(tmp_path: pathlib.Path, docs: list[dict[str, Any]], *args: str) -> dict[str, Any]:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["sim", "-f", str(path), *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _groups(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in doc["podGroups"]}


def test_delayed_job_says_until_when_and_preempts_after(tmp_path: pathlib.Path) -> None:
    docs = [
        NODE,
        _group("victim", "train"),
        _pod("victim-0", "victim", node="node-1"),
        _group("build", "build", preemptionDelay="10s"),
        _pod("build-0", "build"),
    ]
    early = _sim(tmp_path, docs, "--cycles", "5", "--actions", "allocate,reclaim,preempt,consolidation")
    [condition] = _groups(early)["build"]["conditions"]
    assert condition["reason"] == "PreemptionDelayNotElapsed"
    assert {
        "reason": "PreemptionDelayNotElapsed",
        "message": (
            "Workload is within its preemption delay window (10s) and may not trigger evictions before "
            "2026-01-01T00:00:10Z"
        ),
    } in condition["reasons"]
    # one condition event per cycle, however many evicting actions skipped the job
    events = [e for e in early["events"] if e["reason"] == "PreemptionDelayNotElapsed"]
    assert len({e["time"] for e in events}) == len(events)
    assert early["evictions"] == []
    assert _groups(early)["build"]["preemptionDelay"] == "10s"

    late = _sim(tmp_path, docs, "--cycles", "12", "--actions", "allocate,preempt")
    [eviction] = late["evictions"]
    assert (eviction["pod"], eviction["time"], eviction["preemptor"]) == (
        "default/victim-0",
        "2026-01-01T00:00:10Z",
        "default/build",
    )


def test_eviction_stamps_the_podgroup_and_re_arms_its_delay(tmp_path: pathlib.Path) -> None:
    # the victim was created an hour ago with a 20s delay; being evicted starts its window again
    docs = [
        NODE,
        _group("victim", "build-preemptible", created="2025-12-31T23:00:00Z", preemptionDelay="20s"),
        _pod("victim-0", "victim", node="node-1"),
        _group("urgent", "inference"),
        _pod("urgent-0", "urgent"),
    ]
    doc = _sim(tmp_path, docs, "--cycles", "1", "--actions", "allocate,preempt")
    victim = _groups(doc)["victim"]
    assert victim["annotations"][api_podgroup.LAST_EVICTION_ANNOTATION] == START
    assert "kai.scheduler/last-eviction-timestamp" not in _groups(doc)["urgent"]["annotations"]

    # read back by the snapshot: the window now ends 20s after the eviction, not after creation
    from kai.core.snapshot_builder import build_snapshot

    raw = _group("victim", "build-preemptible", created="2025-12-31T23:00:00Z", preemptionDelay="20s")
    raw["metadata"]["annotations"] = dict(victim["annotations"])
    pg = api_podgroup.parse_podgroup(raw, source=None)
    built = build_snapshot(
        now=parse_timestamp(START) + 5,
        nodes=[],
        pods=[],
        foreign_pods=[],
        podgroups=[pg],
        queues=[],
        priority_classes={},
    )
    [job] = built.snapshot.jobs
    assert job.last_eviction == parse_timestamp(START)
    assert job.preemption_delay_end == parse_timestamp(START) + 20


def test_workload_annotation_reaches_the_podgroup_and_bad_one_warns(tmp_path: pathlib.Path) -> None:
    queue_label = {"kai.scheduler/queue": "default-queue"}
    docs = [
        NODE,
        _pod("bare-a", None, labels=queue_label, annotations={DELAY: "2m", SAFE: "false", GRACE: "-1s"}),
        _pod("bare-b", None, labels=queue_label, annotations={DELAY: "120"}),
    ]
    doc = _sim(tmp_path, docs, "--cycles", "1", "--actions", "allocate")
    groups = {g["name"].split("-")[2]: g for g in doc["podGroups"]}
    assert (groups["a"]["preemptionDelay"], groups["a"]["safeToConsolidate"], groups["a"]["stalenessGracePeriod"]) == (
        "2m0s",
        False,
        "-1s",
    )
    assert (groups["b"]["preemptionDelay"], groups["b"]["safeToConsolidate"]) == (None, True)
    [warning] = [e for e in doc["events"] if e["reason"] == "InvalidAnnotation"]
    assert warning["object"] == "Pod/default/bare-b"
    assert 'got "120"' in warning["message"]


@pytest.mark.parametrize(
    ("spec", "cycles", "phase", "named"),
    [
        ({}, 61, "Releasing", "longer than the scheduler's staleness grace period of 60s"),
        (
            {"stalenessGracePeriod": "10s"},
            11,
            "Releasing",
            "longer than its own (stalenessGracePeriod) staleness grace period of 10s",
        ),
        ({"stalenessGracePeriod": "10s"}, 10, "Running", None),
        ({"stalenessGracePeriod": "-1s"}, 120, "Running", None),
    ],
)
def test_stale_gang_uses_its_own_grace_period(
    spec: dict[str, Any], cycles: int, phase: str, named: str | None, tmp_path: pathlib.Path
) -> None:
    docs = [NODE, _group("gang", "train", minMember=2, **spec), _pod("gang-0", "gang", node="node-1")]
    doc = _sim(tmp_path, docs, "--cycles", str(cycles), "--actions", "stalegangeviction")
    assert [p["phase"] for p in doc["pods"]] == [phase]
    evicted = [e["message"] for e in doc["events"] if e["reason"] == "Evicted"]
    if named is None:
        assert evicted == []
    else:
        [message] = evicted
        assert named in message
