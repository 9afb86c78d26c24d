"""Typed Kubernetes and KAI objects, parsed and validated from the YAML or JSON a user writes."""
