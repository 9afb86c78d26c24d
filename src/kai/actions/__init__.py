"""Scheduling actions (allocate, consolidation, reclaim, preempt, stalegangeviction), run on a session."""
