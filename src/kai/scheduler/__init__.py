"""The scheduling cycle: configuration, plugin and action registries, and the one function that runs a cycle."""
