"""The bookkeeping of a cycle's victim searches: each action's scenario budget, how its searches ended,
and the hopeless searches remembered from an earlier cycle.

A search simulates scenarios (`kai.actions.common.solver`); each one is charged to its action's budget
(`SchedulerConfig.max_action_scenarios`, by action or `default`; 0 or absent: no limit, KAI's outcomes).
A search that needs one more scenario than the budget has left stops, rolled back, and its action
stops with it, as KAI's action search budget ends the action (KAI's budget is a deadline; here it is
counted in scenarios, so that the same input gives the same decisions).

A failed search is remembered, with the scenarios it cost (`HopelessSearches`). An adapter that knows
nothing in the cluster changed since (and no clock rule changed an outcome) passes them to the next
cycle, which then replays the first one up to each of these attempts: each would fail again, so it is
skipped, charged what it cost when it ran (the budget runs out at the same attempt either way) and
still marks its signature as failed. Outcomes are the same with or without the memory.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import msgspec
from msgspec.structs import replace

from kai.core.decisions import HopelessSearches, SearchKey, SearchReport
from kai.core.session import Session

DEFAULT = "default"  # the budget of an action that has none of its own


class BudgetExhausted(Exception):
    """The action's scenario budget has run out (raised by `charge`; the search rolls back)."""


class _Action(msgspec.Struct):
    """One action's budget, and its counts so far as the report the cycle will return."""

    limit: int
    counts: SearchReport
    spent: int = 0  # scenarios of the current attempt

    def count(self, **more: int) -> None:
        """Add to the named counters of the report."""
        counts = self.counts
        self.counts = replace(counts, **{name: getattr(counts, name) + n for name, n in more.items()})


class _Book(msgspec.Struct):
    remembered: HopelessSearches | None = None
    actions: dict[str, _Action] = msgspec.field(default_factory=dict)  # in the order they ran
    failed: dict[SearchKey, int] = msgspec.field(default_factory=dict)  # this cycle's hopeless searches


_BOOKS: weakref.WeakKeyDictionary[Session, _Book] = weakref.WeakKeyDictionary()


def _book(session: Session) -> _Book:
    book = _BOOKS.get(session)
    if book is None:
        book = _BOOKS[session] = _Book()
    return book


def remember(session: Session, hopeless: HopelessSearches | None) -> None:
    """Give the session the hopeless searches of an earlier cycle on the same cluster; they are used
    only while the session's clock is in their [since, until)."""
    if hopeless is not None and hopeless.attempts and hopeless.since <= session.now < hopeless.until:
        _book(session).remembered = hopeless


def begin(session: Session, action: str) -> None:
    """An action starts searching: its budget is set (once per action and cycle)."""
    book = _book(session)
    if action not in book.actions:
        budgets = session.config.max_action_scenarios
        book.actions[action] = _Action(
            limit=budgets.get(action, budgets.get(DEFAULT, 0)), counts=SearchReport(action=action)
        )


def charge(session: Session, action: str) -> None:
    """One more scenario for the action's current search; raises BudgetExhausted when none is left."""
    entry = _book(session).actions.get(action)
    if entry is None:
        return  # a search outside the job loops: no budget
    if entry.limit and entry.counts.scenarios >= entry.limit:
        raise BudgetExhausted(action)
    entry.count(scenarios=1)
    entry.spent += 1


def start_attempt(session: Session, action: str) -> None:
    _book(session).actions[action].spent = 0


def remembered_cost(session: Session, key: SearchKey) -> int | None:
    """What the attempt cost in the earlier cycle if its search failed there, else None."""
    remembered = _book(session).remembered
    return None if remembered is None else remembered.attempts.get(key)


def affordable(session: Session, action: str, cost: int) -> bool:
    """Would the action's budget cover `cost` more scenarios?"""
    entry = _book(session).actions[action]
    return not entry.limit or entry.counts.scenarios + cost <= entry.limit


def solved(session: Session, action: str) -> None:
    _book(session).actions[action].count(solved=1)


def failed(session: Session, key: SearchKey, *, remembered: int | None = None) -> None:
    """The attempt `key` found no scenario; `remembered`: it was skipped, at this remembered cost."""
    book = _book(session)
    entry = book.actions[key[0]]
    if remembered is not None:
        entry.spent = remembered
        entry.count(scenarios=remembered, remembered=1)
    entry.count(failed=1)
    book.failed[key] = entry.spent


def exhausted(session: Session, action: str, *, left: int) -> None:
    """The budget ran out during an attempt; `left` jobs (that one included) were not searched."""
    entry = _book(session).actions[action]
    entry.count(not_attempted=left)
    entry.counts = replace(entry.counts, budget_exhausted=True)


def reports(session: Session) -> tuple[SearchReport, ...]:
    return tuple(entry.counts for entry in _book(session).actions.values())


def hopeless(session: Session, *, until: Callable[[Session], float]) -> HopelessSearches:
    """This cycle's failed searches, to be skipped by a next cycle on the same cluster before `until(session)`
    (asked only when some search failed)."""
    failed = _book(session).failed
    if not failed:
        return HopelessSearches(since=session.now)
    return HopelessSearches(attempts=dict(failed), since=session.now, until=until(session))
