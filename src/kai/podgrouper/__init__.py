"""The pod grouper: derives a PodGroup (gang) from a pod's top owner, per workload kind."""
