"""Why a workload waits, what would make it run, and when: one explanation engine for every view.

The engine is pure: it reads a cycle's snapshot, the session the cycle's actions left behind and a
few facts about the input objects (who owns which pod, which priority classes exist), and returns
data. Reasons come from what the actions decided and from the plugins' own gates; suggestions are
changes applied to a copy of the snapshot and verified by running the cycle again. `kai explain`,
`kai sim`'s conditions and events, and the tables all print its words.
"""
