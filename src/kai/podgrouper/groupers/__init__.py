"""Per-kind pod groupers; ``kai.podgrouper.registry`` maps workload kinds to them."""
