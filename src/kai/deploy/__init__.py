"""What a platform team installs next to `kai run`: the Queue and PodGroup CRDs, shipped as package data.

The CRD YAML lives once, in ``kai/deploy/crds/``; the Helm chart's ``crds/`` directory is a copy
made by ``deploy/render.py`` (a test fails when the two drift), and ``kai install crds`` prints it.
"""
