"""Property: no input of any shape makes `kai sim` crash. Valid manifests of every kind kai reads are
mutated (wrong types, missing and extra fields, huge and negative numbers, unicode, duplicates, our label
and annotation keys with odd values, queue parent cycles); kai must exit 0 or 2, never print a
traceback, and every error must name the file, the document, the object and the field.

Deterministic (derandomized, no example database) and kept to a number of examples that runs in
seconds.
"""

from __future__ import annotations

import copy
import pathlib
import re
import tempfile
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api.strict import KAI_KEYS, KAI_ONLY_KEYS, UNPREFIXED_KEYS
from kai.cli.main import main

HERE = pathlib.Path(__file__).parent
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
CONTAINER = {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}}
POD_SPEC = {"schedulerName": "kai-scheduler", "containers": [CONTAINER]}
TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": POD_SPEC}


def _from_files() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((HERE / "sim_controllers" / "manifests").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for name in ("gpu-memory-shares-device", "kai-allocate-gang-train"):
        docs += [d for d in yaml.safe_load_all((HERE / "scenarios" / name / "manifests.yaml").read_text()) if d]
    return docs


def _written() -> list[dict[str, Any]]:
    meta = {"name": "x", "namespace": "default", "labels": {"kai.scheduler/queue": "default-queue"}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "b"}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"}, "value": 10},
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": meta,
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": meta,
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": meta,
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}},
        },
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": meta,
            "spec": {"rayClusterConfig": {"headGroupSpec": {"template": TEMPLATE}, "workerGroupSpecs": []}},
        },
        {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": meta, "spec": {"template": TEMPLATE}},
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "team"},
            "spec": {"parentQueue": "default-parent-queue", "resources": {"gpu": UNLIMITED, "cpu": UNLIMITED}},
        },
    ]


BASE: list[dict[str, Any]] = _from_files() + _written()
KINDS = sorted({d["kind"] for d in BASE})
OUR_KEYS = sorted(KAI_KEYS | set(KAI_ONLY_KEYS) | set(UNPREFIXED_KEYS))

NAME = st.text(alphabet=st.characters(categories=("L", "N"), include_characters="-./_ "), min_size=1, max_size=12)
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["-1", "0", "1e308", "-5", "0.5", "1.5", "2Gi", "1Ei", "-5m", "90s", "true", "", "queue"]),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=16),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.dictionaries(NAME, st.integers(min_value=-3, max_value=3), max_size=2),
)


def _slots(value: Any, out: list[tuple[Any, Any]]) -> None:
    """Every (container, key) in the document, for mutation."""
    if isinstance(value, dict):
        for key in value:
            out.append((value, key))
            _slots(value[key], out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.append((value, i))
            _slots(item, out)


def _metadatas(value: Any, out: list[dict[str, Any]]) -> None:
    if isinstance(value, dict):
        if isinstance(value.get("metadata"), dict):
            out.append(value["metadata"])
        for sub in value.values():
            _metadatas(sub, out)
    elif isinstance(value, list):
        for sub in value:
            _metadatas(sub, out)


@st.composite
def mutated(draw: st.DrawFn) -> list[dict[str, Any]]:
    doc = copy.deepcopy(draw(st.sampled_from(BASE)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        op = draw(st.sampled_from(["replace", "replace", "delete", "extra", "key", "grow"]))
        slots: list[tuple[Any, Any]] = []
        _slots(doc, slots)
        if op == "key":
            metas: list[dict[str, Any]] = []
            _metadatas(doc, metas)
            if not metas:
                continue
            meta = draw(st.sampled_from(metas))
            where = draw(st.sampled_from(["labels", "annotations"]))
            if not isinstance(meta.get(where), dict):
                meta[where] = {}
            meta[where][draw(st.sampled_from(OUR_KEYS))] = draw(VALUES.map(lambda v: v if v is None else str(v)))
            continue
        if not slots:
            continue
        container, key = draw(st.sampled_from(slots))
        if op == "replace":
            container[key] = draw(VALUES)
        elif op == "delete":
            del container[key]
        elif op == "extra" and isinstance(container, dict):
            container[draw(NAME)] = draw(VALUES)
        elif op == "grow" and isinstance(container, list):
            container.append(copy.deepcopy(container[key]))  # a duplicate list item (containers, subgroups)
    docs = [doc]
    if draw(st.booleans()):
        docs.append(copy.deepcopy(doc))  # the same object twice
    if draw(st.booleans()):
        names = ["qa", "qb", "qc"]
        for name in names:
            parent = draw(st.sampled_from([None, *names]))
            spec: dict[str, Any] = {"resources": {"gpu": UNLIMITED, "cpu": UNLIMITED, "memory": UNLIMITED}}
            if parent is not None:
                spec["parentQueue"] = parent
            docs.append(
                {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
            )
    return docs


ERROR_LINE = re.compile(r"^error: (?P<file>.+?): document \d+: (?P<object>[^:]+): (?P<field>[^:]+): \S")


def test_the_base_manifests_cover_every_kind_kai_reads() -> None:
    from kai.api.kinds import READ_KINDS

    assert {kind for _, kind in READ_KINDS} == set(KINDS)


@settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(docs=mutated())
def test_no_input_makes_kai_sim_crash(docs: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "fuzz.yaml"
        path.write_text(yaml.safe_dump_all(docs, allow_unicode=True), encoding="utf-8")
        result = CliRunner().invoke(main, ["sim", "-f", str(path), "-o", "json"])
    assert result.exit_code in (0, 2), (result.exit_code, result.output, yaml.safe_dump_all(docs))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for line in result.stderr.splitlines():
        if line.startswith("error: "):
            match = ERROR_LINE.match(line)
            assert match is not None, line
            assert match.group("file") == str(path), line
