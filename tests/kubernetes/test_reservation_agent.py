"""The reservation pod's program against a real API server: it reports the one GPU it sees in its pod's
annotation, through the API server's TLS and with a bearer token, and holds on until SIGTERM.

The GPU comes from a stand-in `nvidia-smi` on PATH (no NVML on the test machine)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from kai.kubernetes import client as kc
from kai.kubernetes import resources
from kai.reservation import agent
from tests.kubernetes.controlplane import ControlPlane
from tests.kubernetes.objects import create_pod
from tests.kubernetes.run.support import eventually

AGENT = Path(agent.__file__)


def fake_nvidia_smi(folder: Path, *uuids: str) -> Path:
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + "".join(f"echo {u}\n" for u in uuids))
    script.chmod(0o755)
    return folder


def run_agent(
    control_plane: ControlPlane, tmp_path: Path, namespace: str, name: str, *uuids: str
) -> subprocess.Popen[str]:
    assert control_plane.dir is not None and control_plane.token is not None
    token = tmp_path / "token"
    token.write_text(control_plane.token)
    bin_dir = fake_nvidia_smi(tmp_path, *uuids)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "POD_NAMESPACE": namespace, "POD_NAME": name}
    args = [sys.executable, str(AGENT), "--api-server", control_plane.url, "--token-file", str(token)]
    args += ["--ca-file", str(control_plane.dir / "certs" / "apiserver.crt")]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def test_agent_reports_its_device_uuid_and_holds_until_sigterm(
    kube: kc.KubeClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    control_plane.require_managed()
    await create_pod(kube, namespace, "gpu-reservation-node-a-abcde", scheduler_name="default-scheduler", gpus=1)
    process = run_agent(control_plane, tmp_path, namespace, "gpu-reservation-node-a-abcde", "GPU-0e1d2c3b")

    async def reported() -> str | None:
        pod = await kube.request("GET", resources.PODS.path(namespace=namespace, name="gpu-reservation-node-a-abcde"))
        return ((pod["metadata"].get("annotations") or {}).get(agent.UUID_ANNOTATION)) or None

    try:
        assert await eventually(reported, timeout=30) == "GPU-0e1d2c3b"
        assert process.poll() is None, "it holds the device: the container keeps running"
    finally:
        process.terminate()
        out, err = await asyncio.to_thread(process.communicate, timeout=10)
    assert process.returncode == 0, err
    assert "holds GPU GPU-0e1d2c3b" in out


async def test_agent_refuses_to_report_when_it_sees_more_than_one_device(
    kube: kc.KubeClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    control_plane.require_managed()
    await create_pod(kube, namespace, "gpu-reservation-node-a-fghij", scheduler_name="default-scheduler", gpus=1)
    process = run_agent(control_plane, tmp_path, namespace, "gpu-reservation-node-a-fghij", "GPU-a", "GPU-b")
    _, err = await asyncio.to_thread(process.communicate, timeout=30)
    assert process.returncode == 1
    assert "found 2 GPU devices, 1 was expected" in err
    pod = await kube.request("GET", resources.PODS.path(namespace=namespace, name="gpu-reservation-node-a-fghij"))
    assert agent.UUID_ANNOTATION not in (pod["metadata"].get("annotations") or {})
