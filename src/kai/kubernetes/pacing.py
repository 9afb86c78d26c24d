"""When an early cycle may start: soon for a pod that arrives alone, never so often that a stream
of arrivals keeps the scheduling loop busy.

`kai run` starts a cycle early, instead of at the next period, when a pod of ours starts waiting
on a cluster where nothing else waits (`kai.kubernetes.runner`). A cycle is a snapshot of every
pod and every action (a quarter of a second of CPU at 1,000 nodes and 5,000 pods), so arrivals
that each started one at once could keep the loop, and the process's CPU, busy without end. The
loop's time is budgeted instead: over any `window` seconds (the schedule period) the cycles may
have taken at most `share` of it. A pod that arrives on a loop that has been mostly idle gets its
cycle at once; a stream of arrivals gets cycles at most `share` of the time, as the periodic
cycles of a backlog would take. (The rule before, "never sooner after the last cycle than that
cycle took", bounded the loop the same way but made a lone arrival right after a cycle wait for
the length of that cycle.)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class BusyWindow:
    """The recent cycles (start, end; the event loop's clock) and when the next early one may start."""

    window: float
    share: float = 0.5
    _cycles: deque[tuple[float, float]] = field(default_factory=deque)

    def record(self, start: float, end: float) -> None:
        self._cycles.append((start, end))
        while self._cycles and self._cycles[0][1] <= end - self.window:
            self._cycles.popleft()

    def busy(self, at: float) -> float:
        """Seconds of the `window` before `at` that cycles took."""
        since = at - self.window
        return sum(max(0.0, min(end, at) - max(start, since)) for start, end in self._cycles)

    def earliest(self, now: float) -> float:
        """The earliest time from `now` at which the cycles of the window before it took at most
        `share` of it (no cycle runs in between: one cycle at a time)."""
        budget = self.share * self.window
        if self.busy(now) <= budget:
            return now
        low, high = now, now + self.window  # busy() only falls from now on; nothing is left by `high`
        for _ in range(30):
            middle = (low + high) / 2
            if self.busy(middle) <= budget:
                high = middle
            else:
                low = middle
        return high
