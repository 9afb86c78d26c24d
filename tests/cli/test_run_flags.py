"""`kai run` refuses inconsistent flags before it connects to anything (exit 2, the flag named)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from kai.cli.main import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--leader-elect-lease-duration", "5", "--leader-elect-renew-deadline", "5"],
            "error: --leader-elect-*: the lease duration must be longer than the renew deadline",
        ),
        (
            ["--leader-elect-renew-deadline", "1", "--leader-elect-retry-period", "1"],
            "error: --leader-elect-*: the renew deadline must be longer than",
        ),
        (["--metrics-bind-address", "8080"], "error: --metrics-bind-address: must be HOST:PORT, got '8080'"),
    ],
)
def test_inconsistent_flags_are_refused_before_connecting(flags: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["run", "--kubeconfig", "/nonexistent/kubeconfig", *flags])
    assert result.exit_code == 2
    assert message in result.stderr
