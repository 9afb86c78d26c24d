"""Walks of the queue tree that the reclaim rules and the reclaim action's messages both read.

Reclaim compares two queues at the level where their ancestries meet (siblings under one parent, or
two top-level queues); the rules judge a victim there and the eviction message names those queues, so
both take them from here.
"""

from __future__ import annotations

from collections.abc import Sequence


def path(parents: Sequence[int], queue: int) -> list[int]:
    """The queue's ancestry from the top-level queue down to the queue itself (-1: no parent)."""
    out = []
    while queue >= 0:
        out.append(queue)
        queue = parents[queue]
    return out[::-1]


def leveled_queues(parents: Sequence[int], reclaimer: int, victim: int) -> tuple[int, int]:
    """The two queues compared: the first level where the ancestries differ (siblings, or top queues)."""
    left, right = path(parents, reclaimer), path(parents, victim)
    pair = (left[0], right[0])
    for a, b in zip(left, right, strict=False):
        pair = (a, b)
        if a != b:
            break
    return pair
