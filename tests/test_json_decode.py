"""The fast way in for JSON Lists (`kai.api.json_decode`) reads exactly what the ordinary way reads.

Property: for any manifest (valid ones of every kind kai reads, mutated: wrong types, missing and extra
fields, nulls, our label and annotation keys with odd values), `load_paths` on a JSON `v1 List` gives
the same typed objects, raw documents, skipped objects, errors and warnings (messages byte for byte)
with the fast decoder as with the ordinary checks and parsers alone.
"""

from __future__ import annotations

import copy
import json
import pathlib
import tempfile
from typing import Any

import pytest
from benchmarks.clusters import allocate_manifests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api import json_decode
from kai.sim.loader import Loaded, load_paths
from tests.test_fuzz_inputs import BASE, OUR_KEYS, VALUES, mutated

PODS_AND_NODES = [d for d in BASE if d["kind"] in ("Pod", "Node")]
BARE = [{**d, "metadata": {"name": d["metadata"]["name"]}} for d in PODS_AND_NODES]  # no namespace, labels, ...


def _outcome(loaded: Loaded) -> tuple[Any, ...]:
    return (
        loaded.objects,
        [str(e) for e in loaded.errors],
        [str(w) for w in loaded.warnings],
        loaded.skipped,
    )


def _both(docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[Loaded, Loaded, int]:
    """(fast, ordinary, documents the fast decoder read itself) for these documents as one JSON List."""
    read = 0
    decode = json_decode.decode_list

    def counting(text: str, *, file: str, extra_keys: frozenset[str]) -> json_decode.Decoded | None:
        nonlocal read
        found = decode(text, file=file, extra_keys=extra_keys)
        read += sum(obj is not None for obj in found.objects) if found is not None else 0
        return found

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "cluster.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        with monkeypatch.context() as patch:
            patch.setattr(json_decode, "decode_list", counting)
            fast = load_paths([str(path)], extra_keys=frozenset({"team"}))
        with monkeypatch.context() as patch:
            patch.setattr(json_decode, "decode_list", lambda text, *, file, extra_keys: None)
            ordinary = load_paths([str(path)], extra_keys=frozenset({"team"}))
    return fast, ordinary, read


@st.composite
def pods_and_nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Pods and Nodes with one to three values replaced, added or removed anywhere (nulls included)."""
    docs = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        doc = copy.deepcopy(draw(st.sampled_from(PODS_AND_NODES + BARE)))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            region = draw(st.sampled_from(["metadata", "spec", "status", "", "key"]))
            if region == "key":  # one of our label or annotation keys (or a near miss of one), with some value
                where = doc["metadata"].setdefault(draw(st.sampled_from(["labels", "annotations"])), {})
                key = draw(st.sampled_from([*OUR_KEYS, "team", "kai.scheduler/queu", "gpu-fracton"]))
                where[key] = draw(st.sampled_from(["0.5", "1", "", "90s", "x", "true"]))
                continue
            slots: list[tuple[Any, Any]] = [(doc, region)] if region in doc else []
            _slots(doc.get(region, doc), slots)
            if not slots:
                continue
            container, key = draw(st.sampled_from(slots))
            op = draw(st.sampled_from(["replace", "delete", "extra"]))
            if op == "replace":
                container[key] = draw(VALUES)
            elif op == "delete":
                del container[key]
            elif isinstance(container, dict):
                container[draw(st.sampled_from(["x", "uid", "status", "phase", "team", "labels"]))] = draw(VALUES)
        docs.append(doc)
    return docs


def _slots(value: Any, out: list[tuple[Any, Any]]) -> None:
    if isinstance(value, dict):
        for key in value:
            out.append((value, key))
            _slots(value[key], out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.append((value, i))
            _slots(item, out)


SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(docs=st.one_of(mutated(), pods_and_nodes()))
def test_the_fast_decoder_reads_what_the_ordinary_way_reads(
    docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, ordinary, _ = _both(docs, monkeypatch)
    assert _outcome(fast) == _outcome(ordinary)


def test_the_valid_pods_and_nodes_are_read_by_the_fast_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = allocate_manifests(nodes=20, pods=200)["items"] + PODS_AND_NODES
    fast, ordinary, read = _both(docs, monkeypatch)
    assert _outcome(fast) == _outcome(ordinary)
    assert not fast.errors
    assert read >= 220  # every Pod and Node of the benchmark's cluster, and the valid ones of the base manifests


def test_a_bad_pod_read_fast_elsewhere_is_named_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = allocate_manifests(nodes=2, pods=20)["items"]
    bad = copy.deepcopy(next(d for d in docs if d["kind"] == "Pod"))
    bad["metadata"]["name"] = "bad"
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    bad["spec"]["schedulerNmae"] = "kai-scheduler"
    fast, ordinary, _ = _both([*docs, bad], monkeypatch)
    assert _outcome(fast) == _outcome(ordinary)
    assert [str(e).split(": ", 1)[1] for e in fast.errors] == [
        "document 1: Pod bad: spec.schedulerNmae: unknown field; did you mean schedulerName?"
    ]


def test_a_number_msgspec_cannot_hold_leaves_the_file_to_the_ordinary_way(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = allocate_manifests(nodes=1, pods=2)["items"]
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "cluster.json"
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        path.write_text(
            text.replace(
                '"spec": {"schedulerName"', '"spec": {"terminationGracePeriodSeconds": 1e400, "schedulerName"', 1
            )
        )
        fast = load_paths([str(path)])
        with monkeypatch.context() as patch:
            patch.setattr(json_decode, "decode_list", lambda text, *, file, extra_keys: None)
            ordinary = load_paths([str(path)])
    assert _outcome(fast) == _outcome(ordinary)


def test_the_word_null_in_a_value_is_no_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod whose text has the word null only inside a string is read by the fast decoder; one with a null
    value, in its metadata or its spec, is left to the ordinary way (which drops null fields)."""
    docs = allocate_manifests(nodes=2, pods=20)["items"]
    pods = [d for d in docs if d["kind"] == "Pod"]
    pods[0]["metadata"]["labels"]["team"] = "nullable"
    pods[1]["metadata"]["annotations"] = None
    pods[2]["spec"]["priorityClassName"] = None
    pods[3]["metadata"]["creationTimestamp"] = None
    fast, ordinary, read = _both(docs, monkeypatch)
    assert _outcome(fast) == _outcome(ordinary)
    assert not fast.errors
    assert read == len(docs) - sum(d["kind"] not in ("Pod", "Node") for d in docs) - 3


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("value", ["plain", "caf\u00e9"])
def test_line_ends_and_non_ascii_text_read_the_same(
    line_end: str, value: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """The file is read as bytes; its text is what a text-mode `open` reads (UTF-8, universal newlines)."""
    docs = allocate_manifests(nodes=2, pods=20)["items"]
    docs[-1]["metadata"].setdefault("annotations", {})["note"] = value
    path = tmp_path / "cluster.json"
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=1, ensure_ascii=False)
    path.write_bytes(text.replace("\n", line_end).encode())
    fast = load_paths([str(path)], extra_keys=frozenset({"team"}))
    with monkeypatch.context() as patch:
        patch.setattr(json_decode, "decode_list", lambda text, *, file, extra_keys: None)
        ordinary = load_paths([str(path)], extra_keys=frozenset({"team"}))
    assert _outcome(fast) == _outcome(ordinary)
    assert not fast.errors
    assert any(isinstance(raw, json_decode.JsonDocument) for _, raw in fast.objects)


def test_a_file_that_is_not_utf8_is_named(tmp_path: pathlib.Path) -> None:
    for name in ("cluster.json", "cluster.yaml"):
        path = tmp_path / name
        path.write_bytes(b'{"apiVersion": "v1", "kind": "List", "items": [], "x": "\xff"}')
        assert [str(e) for e in load_paths([str(path)]).errors] == [f"file {path}: is not UTF-8 text"]
