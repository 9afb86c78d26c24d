"""The proportion plugin's policy math: how queues share the cluster (fair share), kept as pure modules.

`division` reproduces KAI's hierarchical fair-share division (deserved quota first, then weighted
over-quota rounds by priority tier, then the whole-unit leftover pass), level by level down the queue
tree. The plugin that wires it into a session calls it once per scheduling cycle.
"""
