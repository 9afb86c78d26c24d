"""Stories in virtual time: `--timeline`, `--at` snapshots and `--max-time` on the seeds' preemption story."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kai.cli.main import main
from kai.cli.views.capture import capture
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths
from tests.cli.golden import check, kai, scene

PREEMPTION = scene("04-build-preempts-train.yaml")


def rows(out: str, section: str) -> dict[str, list[str]]:
    """The pods table under the heading that starts with `section`: name -> the other columns."""
    block = out.split(section, 1)[1].split("\n\n")[1]
    return {line.split()[0]: line.split()[1:] for line in block.splitlines()[2:]}


@pytest.mark.parametrize("columns", [80, 120])
def test_preemption_timeline_matches_golden(columns: int) -> None:
    out = kai(["sim", "-f", PREEMPTION, "--until-idle", "--timeline", "--at", "31s", "--show", "pods"], columns=columns)
    check(f"timeline-preemption-{columns}", out)


def test_timeline_tells_the_story_in_order() -> None:
    out = kai(["sim", "-f", PREEMPTION, "--until-idle", "--timeline", "--show", "pods"], columns=200)
    story = [line.split()[:3] for line in out.split("\n\n")[0].splitlines()[2:]]
    assert story == [
        ["0s", "Created", "pod/train-pod"],
        ["Scheduled", "pod/train-pod:", "Successfully"],
        ["30s", "Created", "pod/build-pod"],
        ["Scheduled", "pod/build-pod:", "Successfully"],
        ["Evicted", "pod/train-pod:", "evicted"],
        [
            "1m0s",
            "Killing",
            "pod/train-pod:",
        ],
    ]
    assert "evicted by preempt: build-pod (priority 100) needs 1 GPU in queue test" in out


def test_at_shows_the_seed_picture_and_the_end_state_follows() -> None:
    """At 31 s the train pod is Terminating next to the running build pod (as in the seed); then it is gone."""
    out = kai(["sim", "-f", PREEMPTION, "--until-idle", "--at", "31s", "--show", "pods"])
    assert rows(out, "At 31s") == {
        "build-pod": ["Running", "1", "node-0"],
        "train-pod": ["Terminating", "1", "node-0"],
    }
    assert rows(out, "Virtual clock") == {"build-pod": ["Running", "1", "node-0"]}


def test_max_time_stops_the_clock_there() -> None:
    result = CliRunner().invoke(main, ["sim", "-f", PREEMPTION, "--until-idle", "--max-time", "31s", "-o", "json"])
    doc = json.loads(result.stdout)
    assert doc["clock"] == "2026-01-01T00:00:31Z"
    assert {p["name"]: p["phase"] for p in doc["pods"]} == {"build-pod": "Running", "train-pod": "Releasing"}


def test_pauses_change_nothing_in_the_run() -> None:
    """Snapshots only look: the JSON document is the same with and without them."""

    def run(pauses: list[float]) -> str:
        loaded = load_paths((PREEMPTION,))
        sim = Simulation(loaded.objects, config=SchedulerConfig())
        seen: list[float] = []
        sim.run(cycles=None, until_idle=True, max_time=3600, pauses=pauses, on_pause=lambda t: seen.append(t))
        capture(sim)
        assert seen == pauses
        return json.dumps(output.build(sim))

    assert run([0.0, 29.0, 30.5, 31.0, 600.0]) == run([])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--until-idle", "--max-time", "20s", "--at", "25s"], "25s is after the end of the run (--max-time 20s)"),
        (["--cycles", "2", "--at", "3s"], "3s is after the end of the run"),
        (["--at", "soon"], "Invalid value for --at"),
        (["--timeline", "-o", "json"], "--timeline and --at print tables"),
    ],
)
def test_bad_story_options_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["sim", "-f", PREEMPTION, *args])
    assert result.exit_code == 2
    assert message in result.output
