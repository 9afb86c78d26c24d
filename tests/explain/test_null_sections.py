"""A fix is a merge patch on the object as it is stored, and a stored object may carry `labels: null`
(or a null `spec`): the patch then sets the section rather than failing. `kai sim` drops nulls when it
loads manifests, so the engine is given such an object directly, as an adapter's lookup would."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import msgspec

from kai.cli.simulate import simulate
from kai.explain import engine, model
from kai.explain.patches import apply_merge_patch
from kai.sim import explain_view

CASE = pathlib.Path(__file__).parent / "cases" / "missing-queue-label" / "manifests.yaml"


def test_a_fix_on_an_object_with_null_labels_sets_them() -> None:
    sim = simulate(
        paths=(str(CASE),),
        cycles=None,
        until_idle=True,
        max_time="24h",
        actions_text=None,
        config_path=None,
        start_time=None,
    )
    ctx = explain_view.context(sim)
    stored = ctx.facts.objects

    def with_null_labels(key: model.ObjectKey) -> Mapping[str, Any] | None:
        found = stored(key)
        if found is None or key.kind != "RayCluster":
            return found
        return {**found, "metadata": {**found["metadata"], "labels": None}, "spec": found["spec"]}

    ctx = msgspec.structs.replace(ctx, facts=msgspec.structs.replace(ctx.facts, objects=with_null_labels))
    [job] = [j for j in ctx.snapshot.jobs if j.display_name == "big"]
    explanation = engine.explain_job(ctx, job, budget=engine.DRY_RUNS_PER_JOB)

    first = explanation.suggestions[0]
    assert first.change == "set the kai.scheduler/queue label of big to team-a"
    [patch] = first.patches
    assert patch.merge_patch == {"metadata": {"labels": {"kai.scheduler/queue": "team-a"}}}
    raycluster = with_null_labels(
        model.ObjectKey(api_version=patch.api_version, kind=patch.kind, namespace="default", name="big")
    )
    assert apply_merge_patch(raycluster, patch.merge_patch)["metadata"]["labels"] == {"kai.scheduler/queue": "team-a"}
