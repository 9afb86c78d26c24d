"""The embedded simulated cluster behind `kai sim` and `kai demo`: store, controllers, virtual clock."""
