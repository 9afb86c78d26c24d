"""What kai refuses, as kubectl would, and the words it uses: queue cycles, unknown kinds, empty input,
URLs, syntax errors, bad options and unwritable output paths. Every refusal exits 2 without a traceback."""

from __future__ import annotations

import http.server
import json
import pathlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from kai.api.errors import Source
from kai.api.manifest import Document, SkippedObject, parse_document
from kai.api.queue import Queue
from kai.cli.main import main
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation

RESOURCES = {k: {"quota": 0, "limit": -1, "overQuotaWeight": 1} for k in ("gpu", "cpu", "memory")}


def queue(name: str, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": RESOURCES}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod(name: str, queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue_name}},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }


def run(args: list[str], stdin: str | None = None) -> Result:
    result = CliRunner().invoke(main, args, input=stdin)
    assert "Traceback" not in result.output
    return result


def sim_file(tmp_path: pathlib.Path, docs: list[dict[str, Any]], *extra: str) -> Result:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return run(["sim", "-f", str(path), "-o", "json", *extra])


# ---------------------------------------------------------------- item 5: queue cycles


def test_two_queues_that_are_each_others_parent(tmp_path: pathlib.Path) -> None:
    result = sim_file(tmp_path, [queue("a", "b"), queue("b", "a")])
    assert result.exit_code == 2
    assert "document 1: Queue a: spec.parentQueue: the parent queues form a cycle: a -> b -> a" in result.stderr
    assert "b in " in result.stderr and "document 2" in result.stderr


def test_a_longer_loop_names_every_queue_once(tmp_path: pathlib.Path) -> None:
    docs = [queue("root"), queue("c", "a"), queue("a", "b"), queue("b", "c"), queue("leaf", "a"), queue("ok", "root")]
    result = sim_file(tmp_path, docs)
    assert result.exit_code == 2
    lines = [line.replace(str(tmp_path), "") for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert "a -> b -> c -> a (queues a, b, c)" in lines[0]
    assert "leaf" not in lines[0] and "root" not in lines[0]


def test_on_a_cluster_the_cycle_is_reported_and_everything_else_scheduled() -> None:
    """Without the loader's check (as `kai run` sees a cluster), cyclic queues are left out, never recursed into."""
    docs = [queue("a", "b"), queue("b", "a"), queue("child", "a"), queue("team"), pod("p-team", "team")]
    docs.append(pod("p-child", "child"))
    objects = []
    for i, raw in enumerate(docs, start=1):
        parsed = parse_document(Document(raw=raw, source=Source(file="cluster", index=i)))
        assert not isinstance(parsed, SkippedObject)
        objects.append((parsed, raw))
    assert sum(isinstance(o, Queue) for o, _ in objects) == 4
    sim = Simulation(objects, config=SchedulerConfig(), start_time=None)
    sim.run(cycles=1, until_idle=False, max_time=60.0)
    doc = output.build(sim)
    pods = {p["name"]: p for p in doc["pods"]}
    assert pods["p-team"]["phase"] == "Running"
    assert pods["p-child"]["phase"] == "Pending"
    warned = {e["object"] for e in doc["events"] if e["reason"] == "InvalidQueue"}
    assert {"Queue/a", "Queue/b", "Queue/child"} <= warned
    queues = {q["name"]: q for q in doc["queues"]}
    for name in ("a", "b", "child"):  # left out of the cycle: listed, with no share and nothing counted
        assert queues[name]["fairShare"]["gpu"] == 0.0 and queues[name]["requested"]["gpu"] == 0.0
    assert queues["team"]["allocated"]["gpu"] == 1.0


# ---------------------------------------------------------------- item 7: kinds and empty input


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        (
            "scheduling.run.ai/v2",
            "Queu",
            'kind: no kind "Queu" is served in group "scheduling.run.ai"; did you mean Queue?',
        ),
        ("v1", "Secrett", 'kind: no kind "Secrett" is served in the core group (apiVersion v1); did you mean Secret?'),
        ("ray.io/v1", "RayClustr", 'kind: unknown kind "RayClustr"; did you mean RayCluster'),
        ("v1", "Queue", 'apiVersion: no Queue is served in "v1"; use apiVersion: scheduling.run.ai/v2'),
        (
            "apps/v1beta1",
            "Deployment",
            'apiVersion: no Deployment is served in "apps/v1beta1"; use apiVersion: apps/v1',
        ),
    ],
)
def test_a_kind_no_api_server_serves_is_refused(
    api_version: str, kind: str, message: str, tmp_path: pathlib.Path
) -> None:
    result = sim_file(tmp_path, [{"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}])
    assert result.exit_code == 2
    assert f"document 1: {kind} x: {message}" in result.stderr


def test_real_kinds_kai_does_not_read_are_skipped_and_listed_with_v(tmp_path: pathlib.Path) -> None:
    docs = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}},
        {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "m"}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "vq"}},
        pod("p", "default-queue"),
    ]
    quiet = sim_file(tmp_path, docs)
    assert quiet.exit_code == 0
    assert "skipped 4 object(s) of kinds kai does not read (Queue, Secret, Service, ServiceMonitor)" in quiet.stderr
    loud = sim_file(tmp_path, docs, "-v")
    assert loud.exit_code == 0
    assert "document 1: v1 Service web: kai does not read this kind" in loud.stderr
    assert "document 4: scheduling.volcano.sh/v1beta1 Queue vq: not the Queue kai reads" in loud.stderr


def test_empty_input_is_refused(tmp_path: pathlib.Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n---\n")
    result = run(["sim", "-f", str(empty)])
    assert result.exit_code == 2
    assert f"error: file {empty}: holds no objects" in result.stderr
    result = run(["sim", "-f", "-"], stdin="")
    assert result.exit_code == 2
    assert "error: file -: holds no objects" in result.stderr
    folder = tmp_path / "none"
    folder.mkdir()
    result = run(["sim", "-f", str(folder)])
    assert result.exit_code == 2
    assert "is a directory with no .yaml, .yml or .json files" in result.stderr


# ---------------------------------------------------------------- item 8: -f URL


@pytest.fixture
def http_server(tmp_path: pathlib.Path) -> Iterator[str]:
    """A local HTTP server on 127.0.0.1 serving tmp_path (no outside network)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_manifests_by_url(http_server: str, tmp_path: pathlib.Path) -> None:
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump(pod("from-url", "default-queue")))
    (tmp_path / "pods.json").write_text(json.dumps(pod("from-json", "default-queue")))
    result = run(["sim", "-f", f"{http_server}/pods.yaml", "-f", f"{http_server}/pods.json", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert {p["name"] for p in json.loads(result.stdout)["pods"]} == {"from-url", "from-json"}


def test_a_missing_url_names_the_http_status(http_server: str) -> None:
    result = run(["sim", "-f", f"{http_server}/nope.yaml"])
    assert result.exit_code == 2
    assert f"error: file {http_server}/nope.yaml: cannot be fetched: the server answered 404" in result.stderr


def test_an_unreachable_url_says_so() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run(["sim", "-f", f"http://127.0.0.1:{port}/q.yaml"])
    assert result.exit_code == 2
    assert f"error: file http://127.0.0.1:{port}/q.yaml: cannot be fetched: " in result.stderr
    assert "refused" in result.stderr.lower()


# ---------------------------------------------------------------- item 9: error texts


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [p\n")
    result = run(["sim", "-f", str(path)])
    assert result.exit_code == 2
    assert f"error: file {path}: is not valid YAML: line 5, column 1: did not find expected ',' or ']'" in result.stderr
    assert "unicode string" not in result.stderr


def test_a_json_syntax_error_names_the_file_and_line(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"apiVersion": "v1",\n "kind": }')
    result = run(["sim", "-f", str(path)])
    assert result.exit_code == 2
    assert f"error: file {path}: is not valid JSON: line 2, column 10: Expecting value" in result.stderr


def test_an_empty_metadata_says_the_name_is_missing(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\nspec: {containers: [{name: c, image: i}]}\n")
    result = run(["sim", "-f", str(path)])
    assert result.exit_code == 2
    assert "document 1: Pod: metadata.name: is missing; every object needs a name" in result.stderr
    assert "metadata: is missing" not in result.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--actions", "allocat", 'error: --actions: unknown action "allocat"; known actions: allocate,'),
        (
            "--start-time",
            "yesterday",
            'error: --start-time: must be an RFC 3339 time such as 2026-01-01T00:00:00Z, got "yesterday"',
        ),
        ("--max-time", "forever", 'error: --max-time: must be a duration such as 90s, 10m or 2h, got "forever"'),
        ("--max-time", "-5m", 'error: --max-time: must be positive, got "-5m"'),
    ],
)
def test_a_bad_option_is_named_once(option: str, value: str, message: str, tmp_path: pathlib.Path) -> None:
    result = sim_file(tmp_path, [pod("p", "default-queue")], option, value)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stderr.count(option) == 1


# ---------------------------------------------------------------- item 10: output paths


def tiny_trace(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,96000,393216,8,V100\n")
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1000,1024,1,1000\n")
    return nodes, pods


@pytest.mark.parametrize(
    ("plot", "message"),
    [
        ("missing-dir/x.png", "the directory {tmp}/missing-dir does not exist"),
        ("curve.pgn", "the file name must end in one of"),
        (".", "is a directory"),
    ],
)
def test_replay_checks_the_plot_path_before_it_runs(plot: str, message: str, tmp_path: pathlib.Path) -> None:
    nodes, pods = tiny_trace(tmp_path)
    target = str(tmp_path / plot)
    result = run(["replay", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--plot", target])
    assert result.exit_code == 2
    assert f"error: --plot {target}: {message.format(tmp=tmp_path)}" in result.stderr
    assert result.stdout == ""  # refused before any work


@pytest.mark.parametrize("key", ["sim.kai.scheduler/duration", "sim.kai.scheduler/create-at"])
def test_a_bad_simulation_annotation_names_its_file_even_in_a_template(key: str, tmp_path: pathlib.Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"metadata": {"annotations": {key: "soon"}}, "spec": pod("x", "default-queue")["spec"]}},
    }
    bare = pod("p", "default-queue")
    bare["metadata"]["annotations"] = {key: "later"}
    result = sim_file(tmp_path, [job, bare])
    assert result.exit_code == 2
    assert f"document 1: Job j: spec.template.metadata.annotations.{key}: must be a duration" in result.stderr
    assert f"document 2: Pod p: metadata.annotations.{key}: must be a duration" in result.stderr


def test_a_count_the_simulator_cannot_create_is_refused_not_hung(tmp_path: pathlib.Path) -> None:
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 100_000_000,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod("x", "default-queue")["spec"]},
        },
    }
    result = sim_file(tmp_path, [deployment])
    assert result.exit_code == 2
    assert "Deployment web: spec.replicas: is 100000000; kai sim creates at most 100000 pods" in result.stderr
    deployment["spec"]["replicas"] = 2**40
    result = sim_file(tmp_path, [deployment])
    assert result.exit_code == 2
    assert "spec.replicas: must be at most 2147483647 (a 32-bit integer)" in result.stderr


def test_exponent_numbers_read_as_kubectl_reads_them(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: q}\nspec:\n  resources:\n"
        "    gpu: {quota: 1e3, limit: -1, overQuotaWeight: 2E-1}\n"
        "    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}\n    memory: {quota: -1, limit: -1, overQuotaWeight: 1}\n"
    )
    result = run(["sim", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    [q] = [q for q in json.loads(result.stdout)["queues"] if q["name"] == "q"]
    assert (q["quota"]["gpu"], q["overQuotaWeight"]["gpu"]) == (1000.0, 0.2)


def test_null_fields_read_as_absent_as_the_api_server_stores_them(tmp_path: pathlib.Path) -> None:
    """`labels: null` is no labels (found by the fuzz test: an explanation once tried to add a label to it)."""
    bare = pod("p", "default-queue")
    bare["metadata"]["labels"] = None
    bare["metadata"]["annotations"] = None
    broken_default = queue("default-queue", "nope")  # a default queue that cannot be used: kai suggests another
    result = sim_file(tmp_path, [bare, broken_default, queue("other")])
    assert result.exit_code == 0, result.output
    [out] = json.loads(result.stdout)["pods"]
    assert (out["name"], out["phase"], out["labels"]) == ("p", "Pending", {})
