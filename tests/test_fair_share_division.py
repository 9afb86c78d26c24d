"""Fair-share division: KAI's own test numbers and hand-computed trees, plus the module's contracts.

The tables live in tests/fair_share/*.yaml. Files of `kind: resource` run through `divide_resource`,
files of `kind: tree` through `divide_tree`; each file states its conventions in its header.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from msgspec.structs import replace

from kai.plugins.proportion.division import (
    QueueShareInput,
    QueueTreeNode,
    divide_resource,
    divide_tree,
)

CASES_DIR = Path(__file__).parent / "fair_share"
TOLERANCE = 1e-6


def _load_files() -> list[dict[str, Any]]:
    documents = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        with path.open() as handle:
            document = yaml.safe_load(handle)
        document["file"] = path.name
        documents.append(document)
    return documents


DOCUMENTS = _load_files()


def _cases(kind: str) -> list[Any]:
    return [
        pytest.param(document, case, id=case["name"])
        for document in DOCUMENTS
        if document["kind"] == kind
        for case in document["cases"]
    ]


RESOURCE_CASES = _cases("resource")
TREE_CASES = _cases("tree")


def _k_value(document: dict[str, Any], case: dict[str, Any]) -> float:
    return float(case.get("k_value", document["k_value"]))


def _share_inputs(document: dict[str, Any], case: dict[str, Any]) -> list[QueueShareInput]:
    queues = []
    for position, raw in enumerate(case["queues"]):
        fields = {"age_rank": position, **document["queue_defaults"], **raw}
        queues.append(
            QueueShareInput(
                name=fields["name"],
                priority=int(fields["priority"]),
                age_rank=int(fields["age_rank"]),
                deserved=float(fields["deserved"]),
                limit=float(fields["limit"]),
                weight=float(fields["weight"]),
                request=float(fields["request"]),
                usage=float(fields["usage"]),
            )
        )
    return queues


def _vector(value: Any, size: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    if isinstance(value, list):
        assert len(value) == size, f"vector {value} should have {size} entries"
        return np.array(value, dtype=np.float64)
    return np.full(size, float(value))


def _tree_inputs(document: dict[str, Any], case: dict[str, Any]) -> tuple[int, list[QueueTreeNode]]:
    size = len(case.get("resources", document["resources"]))
    queues = []
    for position, raw in enumerate(case["queues"]):
        fields = {"age_rank": position, **document["queue_defaults"], **raw}
        queues.append(
            QueueTreeNode(
                name=fields["name"],
                parent=fields["parent"],
                priority=int(fields["priority"]),
                age_rank=int(fields["age_rank"]),
                deserved=_vector(fields["deserved"], size),
                limit=_vector(fields["limit"], size),
                weight=_vector(fields["weight"], size),
                request=_vector(fields["request"], size),
                usage=_vector(fields["usage"], size),
            )
        )
    return size, queues


def test_case_names_are_unique_and_every_case_states_expectations() -> None:
    names = [case["name"] for document in DOCUMENTS for case in document["cases"]]
    assert len(names) == len(set(names))
    assert len(RESOURCE_CASES) >= 60 and len(TREE_CASES) >= 14
    for document in DOCUMENTS:
        for case in document["cases"]:
            assert {q["name"] for q in case["queues"]} == set(case["expected"]), case["name"]


@pytest.mark.parametrize(("document", "case"), RESOURCE_CASES)
def test_divide_resource(document: dict[str, Any], case: dict[str, Any]) -> None:
    result = divide_resource(
        total=float(case["total"]), queues=_share_inputs(document, case), k_value=_k_value(document, case)
    )

    assert result.fair_share == pytest.approx(
        {name: float(value) for name, value in case["expected"].items()}, abs=TOLERANCE
    )
    assert result.remaining == pytest.approx(float(case["remaining"]), abs=TOLERANCE)


@pytest.mark.parametrize(("document", "case"), TREE_CASES)
def test_divide_tree(document: dict[str, Any], case: dict[str, Any]) -> None:
    size, queues = _tree_inputs(document, case)

    shares = divide_tree(total=_vector(case["total"], size), queues=queues, k_value=_k_value(document, case))

    assert set(shares) == set(case["expected"])
    for name, expected in case["expected"].items():
        np.testing.assert_allclose(shares[name], _vector(expected, size), rtol=0, atol=TOLERANCE, err_msg=name)


@pytest.mark.parametrize(("document", "case"), RESOURCE_CASES)
def test_one_level_tree_divides_like_divide_resource(document: dict[str, Any], case: dict[str, Any]) -> None:
    queues = _share_inputs(document, case)
    nodes = [
        QueueTreeNode(
            name=q.name,
            parent=None,
            priority=q.priority,
            age_rank=q.age_rank,
            deserved=np.array([q.deserved]),
            limit=np.array([q.limit]),
            weight=np.array([q.weight]),
            request=np.array([q.request]),
            usage=np.array([q.usage]),
        )
        for q in queues
    ]
    k_value = _k_value(document, case)

    shares = divide_tree(total=np.array([float(case["total"])]), queues=nodes, k_value=k_value)

    single = divide_resource(total=float(case["total"]), queues=queues, k_value=k_value).fair_share
    assert {name: float(vector[0]) for name, vector in shares.items()} == single


@pytest.mark.parametrize(("document", "case"), RESOURCE_CASES)
def test_result_does_not_depend_on_input_order(document: dict[str, Any], case: dict[str, Any]) -> None:
    queues = _share_inputs(document, case)
    shuffled = list(queues)
    random.Random(7).shuffle(shuffled)
    shuffled.reverse()
    k_value = _k_value(document, case)

    first = divide_resource(total=float(case["total"]), queues=queues, k_value=k_value)
    second = divide_resource(total=float(case["total"]), queues=shuffled, k_value=k_value)

    assert first == second


def _node(name: str, parent: str | None, **amounts: float) -> QueueTreeNode:
    def vec(key: str, default: float) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.array([amounts.get(key, default)], dtype=np.float64)

    return QueueTreeNode(
        name=name,
        parent=parent,
        priority=0,
        age_rank=0,
        deserved=vec("deserved", 0.0),
        limit=vec("limit", -1.0),
        weight=vec("weight", 1.0),
        request=vec("request", 0.0),
    )


def test_queues_unreachable_from_the_top_get_zero() -> None:
    # KAI divides only from the top-level queues down, so an orphan (missing parent) and a parent
    # cycle are never divided and keep a fair share of 0.
    queues = [
        _node("top", None, deserved=4, request=4),
        _node("orphan", "deleted-parent", deserved=4, request=4),
        _node("loop-a", "loop-b", deserved=1, request=1),
        _node("loop-b", "loop-a", deserved=1, request=1),
    ]

    shares = divide_tree(total=np.array([10.0]), queues=queues)

    assert {name: float(v[0]) for name, v in shares.items()} == {
        "top": 4.0,
        "orphan": 0.0,
        "loop-a": 0.0,
        "loop-b": 0.0,
    }


def test_empty_parent_name_means_top_level() -> None:
    queues = [_node("a", "", deserved=3, request=3), _node("b", None, deserved=2, request=2)]

    shares = divide_tree(total=np.array([10.0]), queues=queues)

    assert (float(shares["a"][0]), float(shares["b"][0])) == (3.0, 2.0)


def test_inputs_are_not_modified() -> None:
    queues = [
        _node("dept", None, deserved=2, request=6),
        _node("team-1", "dept", deserved=1, request=3),
        _node("team-2", "dept", deserved=1, request=3),
    ]
    before = [(q.deserved.copy(), q.limit.copy(), q.weight.copy(), q.request.copy()) for q in queues]
    total = np.array([5.0])

    divide_tree(total=total, queues=queues)

    assert total.tolist() == [5.0]
    for queue, saved in zip(queues, before, strict=True):
        for now, then in zip((queue.deserved, queue.limit, queue.weight, queue.request), saved, strict=True):
            assert now.tolist() == then.tolist()


def test_no_queues() -> None:
    assert divide_resource(total=3.0, queues=[]).fair_share == {}
    assert divide_resource(total=3.0, queues=[]).remaining == 3.0
    assert divide_tree(total=np.array([3.0, 1.0]), queues=[]) == {}


@pytest.mark.parametrize("k_value", [-0.5, float("nan"), float("inf")])
def test_rejects_invalid_k_value(k_value: float) -> None:
    with pytest.raises(ValueError, match="k_value"):
        divide_resource(total=1.0, queues=[], k_value=k_value)
    with pytest.raises(ValueError, match="k_value"):
        divide_tree(total=np.array([1.0]), queues=[], k_value=k_value)


def test_rejects_duplicate_names() -> None:
    share = QueueShareInput(name="a", priority=0, age_rank=0, deserved=1, limit=-1, weight=1, request=1)
    with pytest.raises(ValueError, match="unique"):
        divide_resource(total=1.0, queues=[share, replace(share, age_rank=1)])
    with pytest.raises(ValueError, match="unique"):
        divide_tree(total=np.array([1.0]), queues=[_node("a", None), _node("a", None)])


def test_rejects_vectors_of_the_wrong_length() -> None:
    bad = replace(_node("b", None), request=np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"queue 'b': request has shape \(2,\), expected \(1,\)"):
        divide_tree(total=np.array([4.0]), queues=[_node("a", None), bad])


def _large_tree(departments: int, teams: int, seed: int) -> tuple[np.ndarray[Any, Any], list[QueueTreeNode]]:
    """A cluster of `departments` x `teams` queues over [gpu, cpu, memory], with busy, mixed requests."""
    rng = np.random.default_rng(seed)
    queues: list[QueueTreeNode] = []
    for d in range(departments):
        team_requests = []
        for t in range(teams):
            request = rng.choice([0.0, 1.0, 4.0, 16.0], size=3) * np.array([1.0, 8000.0, 3.2e10])
            request[0] += rng.choice([0.0, 0.5])
            team_requests.append(request)
            quota = np.where(rng.random(3) < 0.1, -1.0, rng.integers(0, 4, size=3) * np.array([1, 4000, 1.6e10]))
            queues.append(
                QueueTreeNode(
                    name=f"dept-{d:03d}-team-{t:03d}",
                    parent=f"dept-{d:03d}",
                    priority=int(rng.integers(0, 3)),
                    age_rank=len(queues),
                    deserved=quota.astype(np.float64),
                    limit=np.where(rng.random(3) < 0.2, request * 0.75, -1.0),
                    weight=rng.integers(0, 4, size=3).astype(np.float64),
                    request=request,
                    usage=rng.random(3) * 0.05,
                )
            )
        queues.append(
            QueueTreeNode(
                name=f"dept-{d:03d}",
                parent=None,
                priority=int(rng.integers(0, 2)),
                age_rank=len(queues),
                deserved=np.array([teams * 1.0, teams * 4000.0, teams * 1.6e10]),
                limit=np.full(3, -1.0),
                weight=np.ones(3),
                request=np.sum(team_requests, axis=0),
                usage=rng.random(3) * 0.05,
            )
        )
    total = np.array([departments * teams * 2.0, departments * teams * 8000.0, departments * teams * 3.2e10])
    return total, queues


def test_thousand_queue_tree_is_fast_and_deterministic() -> None:
    total, queues = _large_tree(departments=40, teams=24, seed=3)  # 1,000 queues
    assert len(queues) == 1000

    started = time.perf_counter()
    shares = divide_tree(total=total, queues=queues)
    elapsed = time.perf_counter() - started

    assert elapsed < 0.5  # measured at a few ms; this bound only catches accidental blow-ups
    assert set(shares) == {q.name for q in queues}
    again = divide_tree(total=total, queues=list(reversed(queues)))
    for name, vector in shares.items():
        assert vector.shape == (3,)
        assert np.all(np.isfinite(vector)) and np.all(vector >= 0), name
        assert vector.tolist() == again[name].tolist(), name
