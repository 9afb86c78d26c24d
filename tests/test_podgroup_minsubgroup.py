"""PodGroup `minSubGroup` input: what is accepted, and the errors that name file, object and field."""

from __future__ import annotations

import pathlib

import pytest

from kai.api import podgroup as api_podgroup
from tests.input_errors import sim_input_error


def _pg(spec: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}


THREE = [{"name": n, "minMember": 2} for n in ("a", "b", "c")]

BAD = [
    (
        "both-at-top",
        {"minMember": 4, "minSubGroup": 2, "queue": "q", "subGroups": THREE},
        "PodGroup g: spec.minSubGroup: cannot be combined with minMember (they are mutually exclusive)",
    ),
    (
        "both-in-subgroup",
        {
            "queue": "q",
            "subGroups": [
                {"name": "p", "minMember": 1, "minSubGroup": 1},
                {"name": "x", "minMember": 1, "parent": "p"},
            ],
        },
        'PodGroup g: spec.subGroups[0].minSubGroup: cannot be combined with minMember in subgroup "p"',
    ),
    (
        "zero",
        {"minSubGroup": 0, "queue": "q", "subGroups": THREE},
        "PodGroup g: spec.minSubGroup: must be at least 1, got 0",
    ),
    (
        "more-than-top-level",
        {"minSubGroup": 4, "queue": "q", "subGroups": THREE},
        "PodGroup g: spec.minSubGroup: is 4 but the PodGroup has only 3 top-level subgroups",
    ),
    (
        "without-subgroups",
        {"minSubGroup": 1, "queue": "q"},
        "PodGroup g: spec.minSubGroup: needs subGroups",
    ),
    (
        "on-a-leaf",
        {"queue": "q", "subGroups": [{"name": "a", "minSubGroup": 1}]},
        'PodGroup g: spec.subGroups[0].minSubGroup: subgroup "a" has no child subgroups',
    ),
    (
        "more-than-children",
        {"queue": "q", "subGroups": [{"name": "p", "minSubGroup": 2}, {"name": "x", "minMember": 1, "parent": "p"}]},
        'PodGroup g: spec.subGroups[0].minSubGroup: is 2 but subgroup "p" has only 1 child subgroups',
    ),
    (
        "not-a-number",
        {"minSubGroup": "two", "queue": "q", "subGroups": THREE},
        "PodGroup g: spec.minSubGroup: must be an integer",
    ),
]


@pytest.mark.parametrize(("spec", "message"), [(s, m) for _, s, m in BAD], ids=[n for n, _, _ in BAD])
def test_bad_min_sub_group_exits_2_naming_the_field(
    spec: dict[str, object], message: str, tmp_path: pathlib.Path
) -> None:
    assert message in sim_input_error(tmp_path, _pg(spec))


@pytest.mark.parametrize(
    ("spec", "min_member"),
    [
        ({"minSubGroup": 2, "queue": "q", "subGroups": THREE}, 4),
        (  # the cheapest children count: 1 + 2 of {2, 3, 5}
            {
                "minSubGroup": 2,
                "queue": "q",
                "subGroups": [
                    {"name": "a", "minMember": 5},
                    {"name": "b", "minMember": 2},
                    {"name": "c", "minMember": 3},
                ],
            },
            5,
        ),
        (  # nested: leader (1) + workers needing 1 of racks {4, 2}
            {
                "queue": "q",
                "subGroups": [
                    {"name": "leader", "minMember": 1},
                    {"name": "workers", "minSubGroup": 1},
                    {"name": "r1", "minMember": 4, "parent": "workers"},
                    {"name": "r2", "minMember": 2, "parent": "workers"},
                ],
            },
            3,
        ),
        ({"minMember": 6, "queue": "q", "subGroups": THREE}, 6),  # no minSubGroup: minMember as written
    ],
)
def test_min_member_is_the_fewest_pods_that_satisfy_the_tree(spec: dict[str, object], min_member: int) -> None:
    pg = api_podgroup.parse_podgroup(_pg(spec), source=None)
    assert pg.min_member == min_member


def test_min_sub_group_is_kept_on_the_podgroup_and_its_subgroups() -> None:
    spec = {
        "minSubGroup": 1,
        "queue": "q",
        "subGroups": [
            {"name": "p", "minSubGroup": 1},
            {"name": "x", "minMember": 1, "parent": "p"},
            {"name": "y", "minMember": 1},
        ],
    }
    pg = api_podgroup.parse_podgroup(_pg(spec), source=None)
    assert pg.min_sub_group == 1
    assert [s.min_sub_group for s in pg.sub_groups] == [1, None, None]
    assert pg.has_subgroup_tree
