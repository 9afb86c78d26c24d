"""The names that mark GPU reservation pods: their namespace and their `app` label.

In a module of their own (nothing imported) so that `kai run` reads its flag defaults without
importing the scheduling core; the rules about reservation pods are in `kai.cluster.gpu_sharing`.
"""

from __future__ import annotations

RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_APP = "kai-resource-reservation"  # value of the `app` label, and the reservation pods' service account
APP_LABEL = "app"
