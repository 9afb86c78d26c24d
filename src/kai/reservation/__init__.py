"""The GPU reservation pod's program (`agent.py`): standalone, standard library only, so the
reservation image is a bare Python image plus this one file (the Dockerfile's
`resource-reservation` target)."""
