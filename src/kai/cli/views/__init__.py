"""What `kai sim` and `kai demo` print for people: kubectl-style views of the simulated cluster.

One module per view (pods, podgroups, queues, nodes, evictions, timeline). Each renders a
`capture.ClusterView`, the cluster as the simulation left it at one virtual moment, so the same
views serve the end state and `--at` snapshots.
"""
