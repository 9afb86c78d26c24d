"""The scheduling cycle: plugin and action registries, and the one function that runs a cycle."""
