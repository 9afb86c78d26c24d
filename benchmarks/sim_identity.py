"""Is `kai sim` still saying exactly what it said? Record its outputs on a fixed set of inputs, compare.

A speed change to reading, setup, the cycle or the output must not change one byte of what `kai sim`
prints. This records, for a corpus of inputs, the exit status, standard output, standard error and any
exception of `kai sim` run in-process (click's CliRunner), and compares two such records:

    python -m benchmarks.sim_identity cases DIR       # write the corpus once, before changing anything
    python -m benchmarks.sim_identity record DIR before.json
    ... change the code ...
    python -m benchmarks.sim_identity record DIR after.json
    python -m benchmarks.sim_identity compare before.json after.json

The corpus: every scenario table (`tests/scenarios`) and contract example (`../shared/spec/examples`)
with its cycles, actions and configuration, as its YAML (`-o json`, `yaml`, `table`, `wide`; and
`--cycles 3` with every action) and as one JSON `v1 List` (`-o json`, `yaml`, `table`, read by the fast
decoder); the controller manifests (`tests/sim_controllers/manifests`) with `--until-idle`, as YAML and
as a JSON List; and seeded mutations of the fuzz test's manifests (`tests/test_fuzz_inputs.py`: most of
them invalid, so errors and warnings are compared word for word) as YAML and as JSON Lists. Record
the baseline again whenever the intended output changes (another change landed meanwhile).
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import hashlib
import json
import pathlib
import sys
import zlib
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT.parent / "shared" / "spec" / "examples"


def _as_list(text: str) -> str:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, default=str)


def write_cases(out: pathlib.Path, mutations: int = 700) -> int:
    """Write the corpus's input files and `cases.json` (name, files, arguments) under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    cases: list[dict[str, Any]] = []

    def add(name: str, files: list[str], args: list[str], formats: list[str]) -> None:
        for fmt in formats:
            cases.append({"name": f"{name}:{fmt}", "files": files, "args": [*args, "-o", fmt]})

    for base in (ROOT / "tests" / "scenarios", EXAMPLES):
        for case in sorted(base.iterdir()) if base.is_dir() else []:
            if not (case / "expect.yaml").exists():
                continue
            expect = yaml.safe_load((case / "expect.yaml").read_text()) or {}
            args = ["--cycles", str(int(expect.get("cycles", 1)))]
            if expect.get("actions"):
                args += ["--actions", ",".join(expect["actions"])]
            if expect.get("config") is not None:
                config = out / f"{base.name}-{case.name}.config.yaml"
                config.write_text(yaml.safe_dump(expect["config"]))
                args += ["--config", str(config)]
            manifests = case / "manifests.yaml"
            add(f"{base.name}/{case.name}/yaml", [str(manifests)], args, ["json", "yaml", "table", "wide"])
            add(f"{base.name}/{case.name}/yaml-all", [str(manifests)], ["--cycles", "3"], ["json"])
            as_list = out / f"{base.name}-{case.name}.json"
            as_list.write_text(_as_list(manifests.read_text()))
            add(f"{base.name}/{case.name}/list", [str(as_list)], args, ["json", "yaml", "table"])
    idle = ["--until-idle", "--max-time", "10m"]
    for path in sorted((ROOT / "tests" / "sim_controllers" / "manifests").glob("*.yaml")):
        add(f"controllers/{path.name}/yaml", [str(path)], idle, ["json", "table"])
        as_list = out / f"controllers-{path.stem}.json"
        as_list.write_text(_as_list(path.read_text()))
        add(f"controllers/{path.name}/list", [str(as_list)], idle, ["json"])
    for i, docs in enumerate(_mutations(mutations)):
        mutated = out / f"fuzz-{i}.yaml"
        mutated.write_text(yaml.safe_dump_all(docs, allow_unicode=True), encoding="utf-8")
        add(f"fuzz/{i}/yaml", [str(mutated)], [], ["json"])
        try:
            text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        except (TypeError, ValueError):
            continue
        as_list = out / f"fuzz-{i}.json"
        as_list.write_text(text)
        add(f"fuzz/{i}/list", [str(as_list)], [], ["json", "yaml"])
    (out / "cases.json").write_text(json.dumps(cases, indent=1))
    return len(cases)


def _mutations(count: int) -> list[list[dict[str, Any]]]:
    """`count` seeded draws of the fuzz test's mutated manifests."""
    from hypothesis import HealthCheck, given, settings
    from tests.test_fuzz_inputs import mutated

    drawn: list[list[dict[str, Any]]] = []

    @settings(
        max_examples=count, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(docs=mutated())
    def collect(docs: list[dict[str, Any]]) -> None:
        drawn.append(copy.deepcopy(docs))

    collect()
    return drawn[:count]


def record(cases_dir: pathlib.Path, out: pathlib.Path, only: str = "") -> int:
    """Run every case (whose name holds `only`) and write name -> digest and compressed outcome."""
    from click.testing import CliRunner

    from kai.cli.main import main

    cases = json.loads((cases_dir / "cases.json").read_text())
    results: dict[str, dict[str, str]] = {}
    for case in cases:
        if only not in case["name"]:
            continue
        args = ["sim"]
        for file in case["files"]:
            args += ["-f", file]
        result = CliRunner().invoke(main, [*args, *case["args"]])
        exception = (
            None if result.exception is None or isinstance(result.exception, SystemExit) else repr(result.exception)
        )
        blob = json.dumps([result.exit_code, result.stdout, result.stderr, exception]).encode()
        results[case["name"]] = {
            "sha": hashlib.sha256(blob).hexdigest(),
            "blob": base64.b64encode(zlib.compress(blob)).decode(),
        }
    out.write_text(json.dumps(results))
    return len(results)


def compare(before: pathlib.Path, after: pathlib.Path, show: int = 5) -> int:
    """Print the runs that differ (the first few with a diff); the number that differ."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    differ = [name for name in a if name in b and a[name]["sha"] != b[name]["sha"]]
    for name in differ[:show]:
        old, new = (json.loads(zlib.decompress(base64.b64decode(r[name]["blob"]))) for r in (a, b))
        print(f"DIFF {name}: exit {old[0]} -> {new[0]}, exception {old[3]} -> {new[3]}")
        for i in (1, 2):
            lines = difflib.unified_diff(old[i].splitlines(), new[i].splitlines(), lineterm="", n=1)
            print("\n".join(list(lines)[:20]))
    print(f"{len(set(a) & set(b))} compared, {len(differ)} differ, {len(set(a) ^ set(b))} on one side only")
    return len(differ)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sim_identity", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cases = sub.add_parser("cases", help="write the corpus of inputs")
    cases.add_argument("dir", type=pathlib.Path)
    cases.add_argument("--mutations", type=int, default=700)
    rec = sub.add_parser("record", help="record kai sim's outcomes on the corpus")
    rec.add_argument("dir", type=pathlib.Path)
    rec.add_argument("out", type=pathlib.Path)
    rec.add_argument("--only", default="", help="only the cases whose name holds this text")
    cmp = sub.add_parser("compare", help="compare two records")
    cmp.add_argument("before", type=pathlib.Path)
    cmp.add_argument("after", type=pathlib.Path)
    args = parser.parse_args()
    if args.command == "cases":
        print(f"{write_cases(args.dir, args.mutations)} cases")
    elif args.command == "record":
        print(f"{record(args.dir, args.out, args.only)} runs")
    else:
        sys.exit(1 if compare(args.before, args.after) else 0)


if __name__ == "__main__":
    main()
