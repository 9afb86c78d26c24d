"""Node masks for a pod's placement constraints: node selector, required node affinity, taints.

Pure functions; a mask is computed once per distinct constraint per snapshot and shared by every
task that carries it, so filtering a task over thousands of nodes is one vector operation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from kai.api.node import Taint
from kai.api.pod import NodeSelectorRequirement, NodeSelectorTerm, Toleration
from kai.core.model import BoolVector, Constraint


def _requirement_holds(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    if req.operator == "DoesNotExist":
        return value is None
    if value is None or not req.values:
        return False
    try:
        left, right = int(value), int(req.values[0])
    except ValueError:
        return False
    return left > right if req.operator == "Gt" else left < right


def term_holds(term: NodeSelectorTerm, *, labels: Mapping[str, str], node_name: str) -> bool:
    fields = {"metadata.name": node_name}
    return all(_requirement_holds(r, labels) for r in term.expressions) and all(
        _requirement_holds(r, fields) for r in term.fields
    )


def tolerates(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    for tol in tolerations:
        if tol.effect and tol.effect != taint.effect:
            continue
        if tol.operator == "Exists" and (not tol.key or tol.key == taint.key):
            return True
        if tol.operator == "Equal" and tol.key == taint.key and tol.value == taint.value:
            return True
    return False


def selector_mismatch(constraint: Constraint, *, labels: Mapping[str, str], node_name: str) -> str | None:
    """Why a node does not admit the constraint (a fit-error phrase), or None if it does."""
    for key, value in constraint.node_selector:
        if labels.get(key) != value:
            return "node selector mismatch"
    if constraint.affinity_terms and not any(
        term_holds(t, labels=labels, node_name=node_name) for t in constraint.affinity_terms
    ):
        return "node affinity mismatch"
    return None


def untolerated_taint(constraint: Constraint, taints: Sequence[Taint]) -> Taint | None:
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(constraint.tolerations, taint):
            return taint
    return None


def constraint_mask(
    constraint: Constraint,
    *,
    names: Sequence[str],
    labels: Sequence[Mapping[str, str]],
    taints: Sequence[Sequence[Taint]],
) -> BoolVector:
    """Nodes whose labels and taints admit the constraint."""
    mask = np.ones(len(names), dtype=np.bool_)
    trivial = not constraint.node_selector and not constraint.affinity_terms
    for i, name in enumerate(names):
        if not trivial and selector_mismatch(constraint, labels=labels[i], node_name=name) is not None:
            mask[i] = False
        elif taints[i] and untolerated_taint(constraint, taints[i]) is not None:
            mask[i] = False
    return mask
