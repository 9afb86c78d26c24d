"""kai: a Kubernetes scheduler for AI workloads that speaks the API of NVIDIA's KAI Scheduler."""

__version__ = "0.1.0"
