"""Scheduling plugins: policy code that registers callbacks into a session's extension points."""
