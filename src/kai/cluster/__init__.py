"""What every cluster adapter shares: the cluster-state protocol, the pod-state mapping, the pod
grouper's controller logic, the scheduler configuration file and the effects planner.

The simulator (`kai.sim`) and the Kubernetes adapter (`kai.kubernetes`) differ only in where
objects come from and where effects go; every rule about what a cycle sees and what it writes
lives here, once. Pure: no I/O, no clock.
"""
