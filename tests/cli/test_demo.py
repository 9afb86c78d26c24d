"""`kai demo`: the whole story at 80 columns, scene selection, export, and that it tells the truth."""

from __future__ import annotations

import os
import pathlib
import shlex

import pytest
from click.testing import CliRunner

from kai.cli.demo import load_scenes
from kai.cli.main import main
from tests.cli.golden import check, kai


def test_demo_matches_golden_at_80_columns() -> None:
    check("demo-80", kai(["demo"], columns=80))


def test_list_names_every_scene() -> None:
    out = kai(["demo", "--list"])
    assert [line.split()[:2] for line in out.splitlines()] == [[str(s.number), s.slug] for s in load_scenes()]
    assert len(out.splitlines()) == 7


def test_one_scene_by_number_or_name() -> None:
    by_number = kai(["demo", "4"])
    assert by_number == kai(["demo", "build-preempts-train"])
    assert "Scene 4:" in by_number and "Scene 3:" not in by_number


def test_unknown_scene_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["demo", "99"])
    assert result.exit_code == 2
    assert 'no scene "99"' in result.output


def test_exported_scenes_rerun_with_their_command(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user who exports the scenes and runs a scene's printed command sees what the demo showed."""
    out = kai(["demo", "--export", str(tmp_path / "scenes")])
    assert sorted(p.name for p in (tmp_path / "scenes").iterdir()) == [s.file for s in load_scenes()]
    monkeypatch.chdir(tmp_path / "scenes")
    for scene in load_scenes():
        assert scene.command in out
        words = shlex.split(scene.command)
        assert words[:2] == ["kai", "sim"] and os.path.exists(scene.file)
        shown = kai(["demo", str(scene.number)]).split(f"$ {scene.command}\n\n", 1)[1]
        assert kai(words[1:]) == shown


def scene_output(number: int) -> str:
    return kai(["demo", str(number)], columns=120)


def test_scene_4_shows_the_train_pod_terminating_next_to_the_build_pod() -> None:
    snapshot = scene_output(4).split("At 31s")[1].split("Virtual clock")[0]
    assert "train-pod   Terminating" in snapshot and "build-pod   Running" in snapshot


def test_scene_6_shows_the_default_queue_it_talks_about() -> None:
    out = scene_output(6)
    assert "default-queue" in out.split("\nQueues\n")[1]
    assert "raycluster/ray-nolabel   default-queue" in out.split("\nPodGroups\n")[1]
    assert "QueueLabelMissing" in out


def test_scene_7_shares_gpus_as_the_seeds_do() -> None:
    out = scene_output(7)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("raycluster", "vllm"))}
    workers = [r for name, r in rows.items() if "shared-gpu-worker" in name]
    servers = [r for name, r in rows.items() if name.startswith("vllm")]
    assert len({r[-1] for r in workers}) == 1 and [r[2] for r in workers] == ["0.5", "0.5"]
    assert len({r[-1] for r in servers}) == 1 and sorted(r[2] for r in servers) == ["0.2", "0.7"]
    queues = out.split("\nQueues\n")[1].split("\n\n")[0]
    assert "team-a                    department-1" in queues and "test                      default" in queues


def test_pods_show_their_gpu_request() -> None:
    out = scene_output(1)
    assert "llm-pretrain-worker-0   Running   8     node-0" in out
