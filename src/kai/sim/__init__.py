"""The embedded simulated cluster behind `kai sim` and `kai demo`: object store, controllers, virtual clock."""
