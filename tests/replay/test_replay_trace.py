"""Reading the openb CSVs: typed values, and errors that name the file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai.replay import trace

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_nodes_and_pods(tmp_path: Path) -> None:
    nodes = trace.read_nodes(
        write(tmp_path, "nodes.csv", NODE_HEADER + "n-0,96000,393216,8,G2\nn-1,32000,262144,0,\n\n")
    )
    assert nodes == (
        trace.TraceNode(name="n-0", cpu_milli=96000, memory_mib=393216, num_gpu=8, gpu_model="G2"),
        trace.TraceNode(name="n-1", cpu_milli=32000, memory_mib=262144, num_gpu=0, gpu_model=""),
    )
    pods = trace.read_pods(
        write(
            tmp_path,
            "pods.csv",
            POD_HEADER
            + "p-0,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
            + "p-1,16000,32768,1,1000,V100M16|V100M32,LS,Pending,9967058,9968575,\n"
            + "p-2,4000,8192,0,0,,BE,Failed,5,,\n",
        )
    )
    assert pods[0].gpu_models == () and pods[0].gpu_request_milli == 460
    assert pods[1].gpu_models == ("V100M16", "V100M32") and pods[1].scheduled_time is None
    assert pods[2].deletion_time is None and pods[2].shape.needs_gpu is False
    assert pods[1].shape.gpu_models == ("V100M16", "V100M32")
    columns = trace.pod_columns(pods)
    assert columns.gpu_request_milli.tolist() == [460, 1000, 0]


GOOD_POD = "p-0,6000,12288,1,460,,LS,Running,1,2,1\n"


@pytest.mark.parametrize(
    ("kind", "text", "line", "column", "message"),
    [
        pytest.param("pods", "", 1, None, "the file is empty", id="empty-file"),
        pytest.param(
            "pods", POD_HEADER.replace("gpu_milli,", ""), 1, "gpu_milli", "lacks this column", id="missing-column"
        ),
        pytest.param(
            "nodes", "sn,cpu_milli,memory_mib,gpu,model,gpu\n", 1, "gpu", "more than once", id="repeated-column"
        ),
        pytest.param("pods", POD_HEADER + GOOD_POD + "p-1,6000\n", 3, None, "has 2 fields", id="short-row"),
        pytest.param(
            "pods", POD_HEADER + "p-1,6k,12288,1,460,,LS,Running,1,2,1\n", 2, "cpu_milli", "not a whole", id="not-int"
        ),
        pytest.param("nodes", NODE_HEADER + "n-0,96000,-5,8,G2\n", 2, "memory_mib", "is negative", id="negative"),
        pytest.param(
            "pods", POD_HEADER + "p-1,6000,1,1,1200,,LS,Running,1,2,1\n", 2, "gpu_milli", "above 1000", id="share>1000"
        ),
        pytest.param(
            "pods", POD_HEADER + "p-1,6000,1,0,500,,LS,Running,1,2,1\n", 2, "gpu_milli", "num_gpu 0", id="share-no-gpu"
        ),
        pytest.param(
            "pods", POD_HEADER + "p-1,6000,1,2,0,,LS,Running,1,2,1\n", 2, "gpu_milli", "gpu_milli 0", id="gpu-no-share"
        ),
        pytest.param(
            "pods", POD_HEADER + "p-1,6000,1,2,500,,LS,Running,1,2,1\n", 2, "gpu_milli", "share of 500", id="multi-frac"
        ),
        pytest.param(
            "pods", POD_HEADER + GOOD_POD + GOOD_POD, 3, "name", "already appears on line 2", id="duplicate-pod"
        ),
        pytest.param("nodes", NODE_HEADER + ",96000,1,8,G2\n", 2, "sn", "name is empty", id="empty-name"),
        pytest.param(
            "pods",
            POD_HEADER + "p-1,6000,1,1,460,,LS,Running,soon,2,1\n",
            2,
            "creation_time",
            "not a whole",
            id="bad-time",
        ),
    ],
)
def test_bad_rows_name_file_line_and_column(
    tmp_path: Path, kind: str, text: str, line: int, column: str | None, message: str
) -> None:
    path = write(tmp_path, f"{kind}.csv", text)
    reader = trace.read_pods if kind == "pods" else trace.read_nodes
    with pytest.raises(trace.TraceError, match=message) as caught:
        reader(path)
    error = caught.value
    assert (error.path, error.line, error.column) == (path, line, column)
    assert str(error).startswith(f"{path}:{line}")
    assert "To fix:" in str(error)


def test_reads_the_published_default_trace(openb_dir: Path) -> None:
    loaded = trace.read_trace(directory=openb_dir)
    assert len(loaded.nodes) == 1213 and len(loaded.pods) == 8152
    assert sum(n.num_gpu for n in loaded.nodes) == 6212
    assert sum(p.gpu_request_milli for p in loaded.pods) == 6_086_800
    everything = trace.read_nodes(openb_dir / "openb_node_list_all_node.csv")
    assert sum(1 for n in everything if n.num_gpu == 0 and n.gpu_model == "") == 310
