"""Read the Alibaba GPU-sharing trace (clusterdata `cluster-trace-gpu-v2023`, "openb") into typed values.

Why: trace replay measures placement quality on the workload the FGD paper (Weng et al., USENIX ATC
'23) was evaluated on. This module is the only place that knows the CSV layout; everything after it
works on `TraceNode`/`TracePod` values or on the column arrays built from them.

Files (column names exactly as in the published CSVs):

* node lists (`openb_node_list_*.csv`): `sn, cpu_milli, memory_mib, gpu, model`. `gpu` is the
  device count; `model` is empty for CPU-only nodes.
* pod lists (`openb_pod_list_*.csv`): `name, cpu_milli, memory_mib, num_gpu, gpu_milli`, and in most
  lists also `gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time` (the multigpu
  lists have only the first five). `gpu_milli` is the share of each requested device (1-1000;
  fractional only when `num_gpu` is 1); `gpu_spec` lists the allowed GPU models separated by `|`
  (empty or absent = any); times are seconds and may be empty or absent.

Every malformed row raises `TraceError`, which names the file, the line and the column.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt

from kai.plugins import fragmentation

NODE_COLUMNS: tuple[str, ...] = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS: tuple[str, ...] = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
# Columns some published pod lists leave out (the multigpu lists have only POD_COLUMNS). Without
# gpu_spec a pod may use any GPU model; without times the arrival order is the published protocol's
# (it never reads the times), and qos and pod_phase read as empty.
OPTIONAL_POD_COLUMNS: tuple[str, ...] = (
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
# The files the paper's default experiment uses (GPU nodes only; the default pod list).
DEFAULT_NODE_FILE = "openb_node_list_gpu_node.csv"
DEFAULT_POD_FILE = "openb_pod_list_default.csv"

_INTEGER = re.compile(r"-?[0-9]+")


class TraceError(ValueError):
    """A trace file that cannot be read as the openb format; says where and how to fix it."""

    def __init__(self, *, path: Path, line: int, column: str | None, problem: str, fix: str) -> None:
        where = f"{path}:{line}" + (f": column {column!r}" if column is not None else "")
        super().__init__(f"{where}: {problem}. To fix: {fix}")
        self.path = path
        self.line = line
        self.column = column


class TraceNode(msgspec.Struct, frozen=True, kw_only=True):
    name: str  # column `sn`
    cpu_milli: int
    memory_mib: int
    num_gpu: int  # column `gpu`
    gpu_model: str  # column `model`; "" = no GPU model


class TracePod(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per requested device; 0 for CPU-only pods
    gpu_models: tuple[str, ...]  # column `gpu_spec` split on "|"; empty = any model
    qos: str
    phase: str  # column `pod_phase`
    creation_time: int | None
    deletion_time: int | None
    scheduled_time: int | None

    @property
    def gpu_request_milli(self) -> int:
        """num_gpu * gpu_milli: the GPU request the paper's load and allocation metrics count."""
        return self.num_gpu * self.gpu_milli

    @property
    def shape(self) -> fragmentation.TaskShape:
        return fragmentation.TaskShape(
            cpu_milli=self.cpu_milli,
            num_gpu=self.num_gpu,
            gpu_milli=self.gpu_milli,
            gpu_models=self.gpu_models,
        )


class Trace(msgspec.Struct, frozen=True, kw_only=True):
    nodes: tuple[TraceNode, ...]
    pods: tuple[TracePod, ...]


class PodColumns(msgspec.Struct, frozen=True, kw_only=True):
    """The numeric pod columns as read-only arrays, one entry per pod in list order."""

    cpu_milli: npt.NDArray[np.int64]
    memory_mib: npt.NDArray[np.int64]
    num_gpu: npt.NDArray[np.int64]
    gpu_milli: npt.NDArray[np.int64]
    gpu_request_milli: npt.NDArray[np.int64]


def pod_columns(pods: Sequence[TracePod]) -> PodColumns:
    def column(values: list[int]) -> npt.NDArray[np.int64]:
        array = np.array(values, dtype=np.int64)
        array.setflags(write=False)
        return array

    return PodColumns(
        cpu_milli=column([p.cpu_milli for p in pods]),
        memory_mib=column([p.memory_mib for p in pods]),
        num_gpu=column([p.num_gpu for p in pods]),
        gpu_milli=column([p.gpu_milli for p in pods]),
        gpu_request_milli=column([p.gpu_request_milli for p in pods]),
    )


def read_trace(*, directory: Path, node_file: str = DEFAULT_NODE_FILE, pod_file: str = DEFAULT_POD_FILE) -> Trace:
    """Read a node list and a pod list from one directory (defaults: the paper's default experiment)."""
    return Trace(nodes=read_nodes(directory / node_file), pods=read_pods(directory / pod_file))


def read_nodes(path: Path) -> tuple[TraceNode, ...]:
    nodes: list[TraceNode] = []
    first_line: dict[str, int] = {}
    for line, row in _rows(path, NODE_COLUMNS):
        cells = _Cells(path=path, line=line, row=row)
        name = cells.name("sn")
        if name in first_line:
            raise TraceError(
                path=path,
                line=line,
                column="sn",
                problem=f"node {name!r} already appears on line {first_line[name]}",
                fix="give every node a unique `sn`",
            )
        first_line[name] = line
        nodes.append(
            TraceNode(
                name=name,
                cpu_milli=cells.integer("cpu_milli"),
                memory_mib=cells.integer("memory_mib"),
                num_gpu=cells.integer("gpu"),
                gpu_model=row["model"].strip(),
            )
        )
    return tuple(nodes)


def read_pods(path: Path) -> tuple[TracePod, ...]:
    pods: list[TracePod] = []
    first_line: dict[str, int] = {}
    for line, row in _rows(path, POD_COLUMNS):
        cells = _Cells(path=path, line=line, row=row)
        name = cells.name("name")
        if name in first_line:
            raise TraceError(
                path=path,
                line=line,
                column="name",
                problem=f"pod {name!r} already appears on line {first_line[name]}",
                fix="give every pod a unique `name`",
            )
        first_line[name] = line
        num_gpu = cells.integer("num_gpu")
        gpu_milli = cells.integer("gpu_milli", maximum=1000)
        cells.check_gpu_request(num_gpu=num_gpu, gpu_milli=gpu_milli)
        pods.append(
            TracePod(
                name=name,
                cpu_milli=cells.integer("cpu_milli"),
                memory_mib=cells.integer("memory_mib"),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                gpu_models=tuple(part.strip() for part in row.get("gpu_spec", "").split("|") if part.strip()),
                qos=row.get("qos", "").strip(),
                phase=row.get("pod_phase", "").strip(),
                creation_time=cells.optional_integer("creation_time"),
                deletion_time=cells.optional_integer("deletion_time"),
                scheduled_time=cells.optional_integer("scheduled_time"),
            )
        )
    return tuple(pods)


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, cells by column) for each non-blank data row, after checking the header."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise TraceError(
                path=path,
                line=1,
                column=None,
                problem="the file is empty",
                fix=f"start with the header {required}",
            )
        header = [name.strip() for name in header]
        for name in required:
            if name not in header:
                raise TraceError(
                    path=path,
                    line=1,
                    column=name,
                    problem=f"the header lacks this column (found {tuple(header)})",
                    fix=f"use the openb header {','.join(required)}",
                )
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise TraceError(
                path=path,
                line=1,
                column=repeated[0],
                problem="the header names this column more than once",
                fix="keep one column of each name",
            )
        for cells in reader:
            if not cells or all(not cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                raise TraceError(
                    path=path,
                    line=reader.line_num,
                    column=None,
                    problem=f"the row has {len(cells)} fields but the header has {len(header)}",
                    fix="give every row one value per header column (empty values still need their comma)",
                )
            yield reader.line_num, dict(zip(header, cells, strict=True))


class _Cells(msgspec.Struct, frozen=True, kw_only=True):
    path: Path
    line: int
    row: dict[str, str]

    def _fail(self, column: str, problem: str, fix: str) -> TraceError:
        return TraceError(path=self.path, line=self.line, column=column, problem=problem, fix=fix)

    def name(self, column: str) -> str:
        value = self.row[column].strip()
        if not value:
            raise self._fail(column, "the name is empty", "give every row a non-empty name")
        return value

    def integer(self, column: str, *, maximum: int | None = None) -> int:
        raw = self.row[column].strip()
        if not _INTEGER.fullmatch(raw):
            raise self._fail(column, f"{raw!r} is not a whole number", "write a non-negative integer")
        value = int(raw)
        if value < 0:
            raise self._fail(column, f"{value} is negative", "write a non-negative integer")
        if maximum is not None and value > maximum:
            raise self._fail(column, f"{value} is above {maximum}", f"write a value within [0, {maximum}]")
        return value

    def optional_integer(self, column: str) -> int | None:
        """An integer, or None when the cell is empty or the file has no such column."""
        return None if not self.row.get(column, "").strip() else self.integer(column)

    def check_gpu_request(self, *, num_gpu: int, gpu_milli: int) -> None:
        if num_gpu == 0 and gpu_milli != 0:
            raise self._fail("gpu_milli", f"a pod with num_gpu 0 asks for gpu_milli {gpu_milli}", "set gpu_milli to 0")
        if num_gpu > 0 and gpu_milli == 0:
            raise self._fail(
                "gpu_milli",
                f"a pod with num_gpu {num_gpu} asks for gpu_milli 0",
                "set gpu_milli to the share of each device (1000 for whole GPUs)",
            )
        if num_gpu > 1 and gpu_milli != 1000:
            raise self._fail(
                "gpu_milli",
                f"a pod with num_gpu {num_gpu} asks for a share of {gpu_milli} on each device",
                "use gpu_milli 1000 for multi-GPU pods; only single-GPU pods share a device",
            )
