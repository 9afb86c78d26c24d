"""Emulation of the batch/v1 Job and CronJob controllers (kubernetes/kubernetes pkg/controller/job,
pkg/controller/cronjob).

Job:
* Pods `<job>-<5 chars>`; with `completionMode: Indexed`, `<job>-<index>-<5 chars>` plus the
  `batch.kubernetes.io/job-completion-index` label and annotation and hostname `<job>-<index>`.
  Every pod gets the labels the API server puts on a Job's template: `batch.kubernetes.io/
  controller-uid`, `batch.kubernetes.io/job-name`, `controller-uid`, `job-name`.
* Up to `parallelism` active pods until `completions` pods (or indexes) succeeded; without
  `completions`, the Job is done once one pod succeeded and none is left active. Succeeded pods
  are never recreated.
* A pod that fails, or disappears without succeeding (eviction), counts as a failure and is
  replaced while failures stay within `backoffLimit` (default 6); past it the Job fails and its
  active pods are deleted. With `podReplacementPolicy: TerminatingOrFailed` (the default without
  a podFailurePolicy) a pod being deleted is replaced at once; with `Failed`, once it is gone.
* `suspend: true` deletes active pods (not counted as failures) and creates none.
* Failure counting needs memory of the pods seen; it lives in the Job's status under the
  sim-only key `sim.kai.scheduler/tracking` (the real controller uses pod finalizers).

CronJob: the simulator has no cron clock. A CronJob runs once: when it has no Job and never
scheduled one, it creates the Job `<cronjob>-<minutes since epoch of its creationTimestamp>` from
`jobTemplate`, as if the schedule fired at creation. Later runs, history limits and
concurrency policies are not emulated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kai.sim.controllers import model, objects

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CRONJOB_SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"


class JobController(objects.GuardedController):
    """batch/v1 Job."""

    kind = "Job"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        template = objects.required_template(spec, "template", path="spec")
        labels, annotations, pod_spec = objects.template_parts(template, path="spec.template")
        restart = objects.opt_str(pod_spec, "restartPolicy", path="spec.template.spec")
        if restart not in ("Never", "OnFailure"):
            raise objects.InvalidSpec(
                "spec.template.spec.restartPolicy",
                f"must be Never or OnFailure for a Job, got {restart or 'nothing'}",
                "set restartPolicy: Never (or OnFailure) in the pod template",
            )
        parallelism = objects.opt_int(spec, "parallelism", path="spec", default=1)
        completions = objects.opt_int_or_none(spec, "completions", path="spec")
        mode = objects.one_of(
            objects.opt_str(spec, "completionMode", path="spec", default="NonIndexed"),
            ("NonIndexed", "Indexed"),
            field="spec.completionMode",
        )
        indexed = mode == "Indexed"
        if indexed and completions is None:
            raise objects.InvalidSpec(
                "spec.completions", "is required when completionMode is Indexed", "set spec.completions"
            )
        backoff_limit = objects.opt_int(spec, "backoffLimit", path="spec", default=6)
        suspend = objects.opt_bool(spec, "suspend", path="spec")
        default_replacement = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
        replacement = objects.one_of(
            objects.opt_str(spec, "podReplacementPolicy", path="spec", default=default_replacement),
            ("TerminatingOrFailed", "Failed"),
            field="spec.podReplacementPolicy",
        )

        # 1. Count pod outcomes since the last pass.
        status = objects.status_of(owner)
        tracking = objects.tracking_of(owner)
        seen_raw = tracking.get("pods")
        seen: Mapping[str, Any] = seen_raw if isinstance(seen_raw, Mapping) else {}
        stopped = {str(uid) for uid in tracking.get("stopped", ())}
        succeeded = _count(status, "succeeded")
        failed = _count(status, "failed")
        completed = _parse_indexes(status.get("completedIndexes"))
        pods = objects.children_of_kind(children, "Pod")
        states: dict[str, objects.PodState] = {}
        for pod in pods:
            uid = objects.uid_of(pod)
            state = objects.pod_state(pod)
            states[uid] = state
            before = seen.get(uid)
            if state is objects.PodState.SUCCEEDED and before != objects.PodState.SUCCEEDED:
                succeeded += 1
                index = _index_of(pod)
                if indexed and index is not None:
                    completed.add(index)
            elif state is objects.PodState.FAILED and before != objects.PodState.FAILED and uid not in stopped:
                failed += 1
        for uid, before in sorted(seen.items()):
            gone_unfinished = before in (objects.PodState.ACTIVE, objects.PodState.TERMINATING)
            if uid not in states and gone_unfinished and uid not in stopped:
                failed += 1
        stopped &= set(states)

        active = [pod for pod in pods if states[objects.uid_of(pod)] is objects.PodState.ACTIVE]
        terminating = [pod for pod in pods if states[objects.uid_of(pod)] is objects.PodState.TERMINATING]
        conditions = [
            c for c in status.get("conditions") or () if isinstance(c, Mapping) and c.get("type") != "Suspended"
        ]
        finished = objects.condition_true(owner, "Complete") or objects.condition_true(owner, "Failed")

        def complete_now() -> bool:
            if indexed:
                assert completions is not None
                return len({i for i in completed if i < completions}) >= completions
            if completions is not None:
                return succeeded >= completions
            return succeeded > 0 and not active and not terminating

        # 2. Decide: finished already, failed now, complete now, suspended, or create pods.
        creates: list[dict[str, Any]] = []
        deletes: list[model.ObjectRef] = []
        events: list[model.Event] = []

        def stop_active() -> None:
            for pod in active:
                deletes.append(objects.ref_to(pod))
                stopped.add(objects.uid_of(pod))

        if finished:
            pass
        elif failed > backoff_limit:
            message = "Job has reached the specified backoff limit"
            conditions.append(objects.condition("Failed", reason="BackoffLimitExceeded", message=message))
            events.append(objects.owner_event(owner, "Warning", "BackoffLimitExceeded", message))
            stop_active()
        elif complete_now():
            conditions.append(
                objects.condition(
                    "Complete",
                    reason="CompletionsReached",
                    message="Reached expected number of succeeded pods",
                )
            )
            events.append(objects.owner_event(owner, "Normal", "Completed", "Job completed"))
            stop_active()
        elif suspend:
            conditions.append(objects.condition("Suspended", reason="JobSuspended", message="Job suspended"))
            stop_active()
        else:
            busy = active + (terminating if replacement == "Failed" else [])
            room = max(parallelism - len(busy), 0)
            if indexed:
                assert completions is not None
                taken_indexes = {i for i in (_index_of(pod) for pod in busy) if i is not None}
                pending = [i for i in range(completions) if i not in completed and i not in taken_indexes]
                wanted: list[int | None] = list(pending[:room])
            else:
                want = (
                    (parallelism if succeeded == 0 else 0)
                    if completions is None
                    else min(parallelism, completions - succeeded)
                )
                wanted = [None] * max(want - len(busy), 0)
            taken = {objects.name_of(pod) for pod in pods}
            for index in wanted:
                creates.append(
                    _job_pod(
                        owner=owner,
                        index=index,
                        labels=labels,
                        annotations=annotations,
                        pod_spec=pod_spec,
                        taken=taken,
                        names_=names_,
                    )
                )

        # 3. Status, including the bookkeeping for the next pass.
        remaining_active = [pod for pod in active if objects.uid_of(pod) not in stopped]
        new_status: dict[str, Any] = {
            "active": len(remaining_active) + len(creates),
            "ready": sum(1 for pod in remaining_active if objects.pod_running(pod)),
            "succeeded": succeeded,
            "failed": failed,
            "terminating": len(terminating),
        }
        if indexed:
            new_status["completedIndexes"] = _format_indexes(completed)
        if conditions:
            new_status["conditions"] = conditions
        pod_states = {uid: str(state) for uid, state in sorted(states.items())}
        for pod in creates:
            pod_states[pod["metadata"]["uid"]] = str(objects.PodState.ACTIVE)
        new_status[objects.TRACKING_KEY] = {"pods": pod_states, "stopped": sorted(stopped)}
        return model.Reconciliation(
            create=tuple(creates),
            delete=tuple(deletes),
            status=objects.status_change(owner, new_status),
            events=tuple(events),
        )


def _job_pod(
    *,
    owner: model.Obj,
    index: int | None,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    pod_spec: Mapping[str, Any],
    taken: set[str],
    names_: model.NameSource,
) -> dict[str, Any]:
    name = objects.name_of(owner)
    uid = objects.uid_of(owner)
    pod_labels = {
        **labels,
        CONTROLLER_UID_LABEL: uid,
        JOB_NAME_LABEL: name,
        LEGACY_CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: name,
    }
    pod_annotations = dict(annotations)
    spec = dict(pod_spec)
    prefix = f"{name}-"
    if index is not None:
        prefix = f"{name}-{index}-"
        pod_labels[COMPLETION_INDEX] = str(index)
        pod_annotations[COMPLETION_INDEX] = str(index)
        spec.setdefault("hostname", f"{name}-{index}")
    pod_name = objects.unique_name(prefix=prefix, taken=taken, names=names_, scope=uid)
    return objects.build_pod(
        owner=owner,
        name=pod_name,
        generate_name=prefix,
        uid=names_.uid(scope=uid),
        labels=pod_labels,
        annotations=pod_annotations,
        spec=spec,
    )


def _count(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _index_of(pod: model.Obj) -> int | None:
    value = objects.annotations_of(pod).get(COMPLETION_INDEX) or objects.labels_of(pod).get(COMPLETION_INDEX)
    return int(value) if value is not None and value.isdigit() else None


def _parse_indexes(text: Any) -> set[int]:
    """Parse the `completedIndexes` form `1,3-5,7`."""
    result: set[int] = set()
    if not isinstance(text, str):
        return result
    for part in text.split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            result.update(range(int(low), int(high or low) + 1))
    return result


def _format_indexes(indexes: Iterable[int]) -> str:
    """Format indexes as the compact `completedIndexes` ranges."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    start = previous = None
    for value in ordered:
        if start is None:
            start = previous = value
        elif previous is not None and value == previous + 1:
            previous = value
        else:
            parts.append(_range_text(start, previous))
            start = previous = value
    if start is not None:
        parts.append(_range_text(start, previous))
    return ",".join(parts)


def _range_text(start: int, end: int | None) -> str:
    return str(start) if end is None or end == start else f"{start}-{end}"


class CronJobController(objects.GuardedController):
    """batch/v1 CronJob: one run, at creation (see the module docstring)."""

    kind = "CronJob"

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        objects.req_str(spec, "schedule", path="spec", hint="set a cron schedule such as '*/5 * * * *'")
        job_template = objects.req_map(spec, "jobTemplate", path="spec")
        job_spec = objects.req_map(job_template, "spec", path="spec.jobTemplate")
        template = objects.required_template(job_spec, "template", path="spec.jobTemplate.spec")
        objects.template_parts(template, path="spec.jobTemplate.spec.template")
        job_meta = objects.opt_map(job_template, "metadata", path="spec.jobTemplate")
        labels = objects.string_map(
            objects.opt_map(job_meta, "labels", path="spec.jobTemplate.metadata"),
            field="spec.jobTemplate.metadata.labels",
        )
        annotations = objects.string_map(
            objects.opt_map(job_meta, "annotations", path="spec.jobTemplate.metadata"),
            field="spec.jobTemplate.metadata.annotations",
        )
        suspend = objects.opt_bool(spec, "suspend", path="spec")

        status = objects.status_of(owner)
        jobs = objects.children_of_kind(children, "Job")
        running = [
            job
            for job in jobs
            if not (objects.condition_true(job, "Complete") or objects.condition_true(job, "Failed"))
        ]
        new_status: dict[str, Any] = {k: v for k, v in status.items() if k == "lastScheduleTime"}
        creates: list[dict[str, Any]] = []
        if not suspend and not jobs and "lastScheduleTime" not in status:
            scheduled = _creation_time(owner).astimezone(UTC)
            minutes = int(scheduled.timestamp()) // 60
            stamp = scheduled.strftime("%Y-%m-%dT%H:%M:%SZ")
            job = objects.new_object(
                api_version="batch/v1",
                kind="Job",
                name=f"{objects.name_of(owner)}-{minutes}",
                namespace=objects.namespace_of(owner),
                uid=names_.uid(scope=objects.uid_of(owner)),
                owner=owner,
                labels=labels,
                annotations={**annotations, CRONJOB_SCHEDULED: stamp},
                spec=job_spec,
            )
            creates.append(job)
            running.append(job)
            new_status["lastScheduleTime"] = stamp
        if running:
            new_status["active"] = [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": objects.name_of(job),
                    "namespace": objects.namespace_of(job),
                    "uid": objects.uid_of(job),
                }
                for job in running
            ]
        return model.Reconciliation(create=tuple(creates), status=objects.status_change(owner, new_status))


def _creation_time(owner: model.Obj) -> datetime:
    """The owner's creationTimestamp in UTC (the store stamps one on every object it creates).

    YAML loaders may already have turned an unquoted timestamp into a datetime; a time without a
    zone is read as UTC so the Job name never depends on the machine's time zone.
    """
    raw = objects.meta(owner).get("creationTimestamp")
    if isinstance(raw, datetime):
        parsed = raw
    else:
        text = raw if isinstance(raw, str) else "1970-01-01T00:00:00Z"
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise objects.InvalidSpec(
                "metadata.creationTimestamp",
                f"is not an RFC 3339 time: {text!r}",
                "use a time like 2026-01-01T00:00:00Z",
            ) from exc
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
