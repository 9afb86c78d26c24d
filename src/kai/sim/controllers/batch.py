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

CronJob (on the store's virtual clock, which it reads as `now`):
* At each reconcile, the most recent time of `spec.schedule` (standard 5-field cron or @hourly,
  @daily, @midnight, @weekly, @monthly, @yearly, @annually; in `spec.timeZone`, else UTC) that is
  after `status.lastScheduleTime` (else after the creationTimestamp) and not after now is due.
  Missed earlier times are skipped, as the real controller does; a due time older than
  `startingDeadlineSeconds` is skipped too.
* A due run creates the Job `<cronjob>-<minutes since the epoch of the scheduled time>` from
  `jobTemplate` (annotated with `batch.kubernetes.io/cronjob-scheduled-timestamp`), unless
  `concurrencyPolicy: Forbid` and a Job is still active (the run waits, lastScheduleTime is kept),
  or after deleting the active Jobs with `Replace`. `suspend: true` starts nothing.
* Finished Jobs beyond `successfulJobsHistoryLimit` (default 3) and `failedJobsHistoryLimit`
  (default 1) are deleted, oldest first. The answer asks to be reconciled again at the next
  scheduled time (`requeue_at`), so `kai sim --until-idle` runs a CronJob until `--max-time`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

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


CRON_MACROS = {  # the descriptors Kubernetes accepts (robfig/cron's)
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


def _cron(schedule: str) -> str:
    """The schedule as 5 cron fields; InvalidSpec when it is not one Kubernetes would accept."""
    expr = CRON_MACROS.get(schedule.strip(), schedule.strip())
    hint = "use 5 cron fields such as '*/5 * * * *' or a macro such as @hourly"
    if expr.startswith(("TZ=", "CRON_TZ=")):
        raise objects.InvalidSpec("spec.schedule", "must not set a time zone (TZ=...)", "use spec.timeZone")
    if len(expr.split()) != 5:
        raise objects.InvalidSpec("spec.schedule", f"is not a cron schedule: {schedule!r}", hint)
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise objects.InvalidSpec("spec.schedule", f"is not a cron schedule: {schedule!r} ({exc})", hint) from None
    return expr


def _zone(spec: Mapping[str, Any]) -> tzinfo:
    name = objects.opt_str(spec, "timeZone", path="spec")
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise objects.InvalidSpec(
            "spec.timeZone", f"is not a known time zone: {name!r}", "use an IANA name such as Europe/Paris"
        ) from None


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_stamp(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _job_order(job: model.Obj) -> tuple[str, str]:
    """Oldest first: by scheduled time, then name."""
    annotations = objects.meta(job).get("annotations") or {}
    return (str(annotations.get(CRONJOB_SCHEDULED, "")), objects.name_of(job))


class CronJobController(objects.GuardedController):
    """batch/v1 CronJob on the virtual clock (see the module docstring)."""

    kind = "CronJob"

    def reconcile(
        self, *, owner: model.Obj, children: Sequence[model.Obj], names: model.NameSource, now: float | None = None
    ) -> model.Reconciliation:
        return objects.guarded(owner, lambda: self._reconcile_at(owner, children, names, now))

    def _reconcile(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource
    ) -> model.Reconciliation:
        return self._reconcile_at(owner, children, names_, None)

    def _reconcile_at(
        self, owner: model.Obj, children: Sequence[model.Obj], names_: model.NameSource, now: float | None
    ) -> model.Reconciliation:
        spec = objects.spec_of(owner)
        schedule = objects.req_str(spec, "schedule", path="spec", hint="set a cron schedule such as '*/5 * * * *'")
        expr = _cron(schedule)
        zone = _zone(spec)
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
        policy = objects.opt_str(spec, "concurrencyPolicy", path="spec") or "Allow"
        if policy not in CONCURRENCY_POLICIES:
            raise objects.InvalidSpec(
                "spec.concurrencyPolicy", f"must be Allow, Forbid or Replace, got {policy!r}", "use one of those"
            )
        keep_succeeded = objects.opt_int(spec, "successfulJobsHistoryLimit", path="spec", default=3)
        keep_failed = objects.opt_int(spec, "failedJobsHistoryLimit", path="spec", default=1)
        deadline = objects.opt_int(spec, "startingDeadlineSeconds", path="spec", default=-1, minimum=None)

        status = objects.status_of(owner)
        jobs = sorted(objects.children_of_kind(children, "Job"), key=_job_order)
        succeeded = [job for job in jobs if objects.condition_true(job, "Complete")]
        failed = [job for job in jobs if objects.condition_true(job, "Failed")]
        active = [job for job in jobs if job not in succeeded and job not in failed]
        deletes = [objects.ref_to(job) for job in succeeded[: max(0, len(succeeded) - keep_succeeded)]]
        deletes += [objects.ref_to(job) for job in failed[: max(0, len(failed) - keep_failed)]]
        new_status: dict[str, Any] = {
            k: v for k, v in status.items() if k in ("lastScheduleTime", "lastSuccessfulTime")
        }
        creates: list[dict[str, Any]] = []
        events: list[model.Event] = []
        requeue_at = None
        if now is not None and not suspend:
            moment = datetime.fromtimestamp(now, UTC)
            earliest = _parse_stamp(status.get("lastScheduleTime")) or _creation_time(owner).astimezone(UTC)
            local_now = moment.astimezone(zone)
            due = next(CronSim(expr, local_now + timedelta(microseconds=1), reverse=True), None)
            requeue_at = next(CronSim(expr, local_now)).timestamp()
            late = deadline >= 0 and due is not None and due.timestamp() < now - deadline
            if due is not None and due.astimezone(UTC) > earliest and not late:
                if policy == "Forbid" and active:
                    reason = "Not starting job because prior execution is running and concurrency policy is Forbid"
                    events.append(self._event(owner, "JobAlreadyActive", reason))
                else:
                    if policy == "Replace":
                        deletes += [objects.ref_to(job) for job in active]
                        active = []
                    name = f"{objects.name_of(owner)}-{int(due.timestamp()) // 60}"
                    if all(objects.name_of(job) != name for job in jobs):
                        job = objects.new_object(
                            api_version="batch/v1",
                            kind="Job",
                            name=name,
                            namespace=objects.namespace_of(owner),
                            uid=names_.uid(scope=objects.uid_of(owner)),
                            owner=owner,
                            labels=labels,
                            annotations={**annotations, CRONJOB_SCHEDULED: _stamp(due)},
                            spec=job_spec,
                        )
                        creates.append(job)
                        active.append(job)
                        events.append(self._event(owner, "SuccessfulCreate", f"Created job {name}"))
                    new_status["lastScheduleTime"] = _stamp(due)
        if active:
            new_status["active"] = [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": objects.name_of(job),
                    "namespace": objects.namespace_of(job),
                    "uid": objects.uid_of(job),
                }
                for job in active
            ]
        return model.Reconciliation(
            create=tuple(creates),
            delete=tuple(deletes),
            status=objects.status_change(owner, new_status),
            events=tuple(events),
            requeue_at=requeue_at,
        )

    @staticmethod
    def _event(owner: model.Obj, reason: str, message: str) -> model.Event:
        return model.Event(
            type="Normal",
            reason=reason,
            message=message,
            kind="CronJob",
            namespace=objects.namespace_of(owner),
            name=objects.name_of(owner),
        )


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
