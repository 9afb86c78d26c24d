"""The real control plane the end-to-end tests run against, and what tests may do to it.

`ControlPlane.start` runs `../shared/k8s/cluster up DIR --controllers` (etcd, kube-apiserver,
kube-controller-manager on loopback; see that directory's README); `ControlPlane.external` wraps any
cluster named by a kubeconfig (`KAI_E2E_KUBECONFIG`). Tests that restart or freeze the API server
need the managed kind and skip otherwise (`require_managed`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO.parent / "shared" / "k8s" / "cluster"
BINARIES = CLUSTER_SCRIPT.parent / "bin"

# Kills the control plane in DIR once the test process PID is gone, so that a test run that is
# itself killed (a timeout, ^C twice) leaves no API server behind. It keeps sweeping for a while
# (a `cluster up` cut short goes on starting processes); each pid file is removed once its process
# is killed, so no pid is killed twice. `stop()` ends the reaper first.
_REAPER = """
import os, pathlib, signal, sys, time
watched, run = int(sys.argv[1]), pathlib.Path(sys.argv[2])
while True:
    try:
        os.kill(watched, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
for _ in range(75):
    for pidfile in run.glob("*.pid"):
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        pidfile.unlink(missing_ok=True)
    time.sleep(1)
"""


def missing_binaries() -> str | None:
    """Why the managed control plane cannot run here, or None if it can."""
    if not CLUSTER_SCRIPT.is_file():
        return f"no cluster script at {CLUSTER_SCRIPT}"
    if not BINARIES.is_dir() or not any(BINARIES.glob("kube-apiserver*")):
        return f"no Kubernetes binaries in {BINARIES}"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlPlane:
    """One API server for the whole test session.

    `kubeconfig` is the admin kubeconfig; `url` and `token` are set for the managed cluster (and
    for an external one whose kubeconfig uses a bearer token); `dir` is None for an external one.
    """

    kubeconfig: Path
    url: str
    token: str | None
    dir: Path | None
    reaper: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)

    @property
    def managed(self) -> bool:
        return self.dir is not None

    @property
    def apiserver_pid(self) -> int:
        return int((self._dir / "kube-apiserver.pid").read_text())

    @property
    def _dir(self) -> Path:
        if self.dir is None:
            raise RuntimeError("an external cluster cannot be restarted or frozen")
        return self.dir

    @classmethod
    def start(cls, dir: Path) -> ControlPlane:
        """`cluster up DIR --controllers`; raises RuntimeError with the script's output if it fails."""
        reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(os.getpid()), str(dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        done = subprocess.run(
            [str(CLUSTER_SCRIPT), "up", str(dir), "--controllers"], capture_output=True, text=True, timeout=180
        )
        if done.returncode != 0:
            raise RuntimeError(f"cluster up {dir} failed:\n{done.stdout}{done.stderr}")
        env = dict(line.split("=", 1) for line in (dir / "env").read_text().split())
        return cls(
            kubeconfig=Path(env["KUBECONFIG"]), url=env["KUBE_API_URL"], token=env["KUBE_TOKEN"], dir=dir, reaper=reaper
        )

    @classmethod
    def external(cls, kubeconfig: Path) -> ControlPlane:
        from kai.kubernetes import kubeconfig as kc

        config = kc.load(kubeconfig=kubeconfig)
        token = config.user.token if config.user is not None else None
        return cls(kubeconfig=kubeconfig, url=config.cluster.server, token=token, dir=None)

    def stop(self) -> None:
        """Kill the managed control plane (its directory is thrown away, so nothing needs a clean exit)."""
        if self.dir is None:
            return
        if self.reaper is not None:
            self.reaper.kill()
            self.reaper.wait()
        for pidfile in self.dir.glob("*.pid"):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            pidfile.unlink()

    def restart_apiserver(self, *, pause: float = 0.0) -> None:
        """Kill kube-apiserver (SIGKILL: it dies, nothing drains) and start it again with the same data.

        Every watch drops and old resourceVersions may get 410; `cluster restart` brings it back.
        """
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.apiserver_pid, signal.SIGKILL)
        done = subprocess.run(
            [str(CLUSTER_SCRIPT), "restart", str(self._dir), "--pause", str(pause)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"cluster restart failed:\n{done.stdout}{done.stderr}")

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """SIGSTOP kube-apiserver for the body of the `with`, SIGCONT after: connections stay open, silent."""
        pid = self.apiserver_pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def require_managed(self) -> None:
        """Skip the calling test on an external cluster (it restarts or freezes the API server)."""
        if not self.managed:
            pytest.skip("needs the managed control plane (restarts or freezes kube-apiserver)")
