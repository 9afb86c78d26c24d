"""The end of the `kai` process: quick once an offline command has written everything.

At exit the interpreter frees every object the run made, one by one; after `kai sim` on 50,000 pods
that is 0.14 s of CPU spent on memory the operating system takes back anyway. A command that keeps
nothing running and has written its output (`kai sim`) asks for a quick end (`end_quickly`); when
`kai` runs as a program (`run`), such a command that succeeded flushes its output and ends with
`os._exit(0)` (as mypy ends its runs). Anything else (an error, another command, a failed flush)
ends as Python ends. In-process callers, such as tests invoking the group with click's CliRunner,
never end quickly.

The command's return frees its locals too: for `kai sim` on 50,000 pods, the simulation and the output
document it built, another 0.07 s of CPU. So a command ending quickly names what it built
(`end_quickly(simulation, doc)`) and the program holds that until `os._exit`; in-process nothing is
held (the objects go as the command returns, as they always did).

The start of the process: numpy's wheels bring OpenBLAS, which starts a pool of worker threads when
numpy is imported, one per core. kai never hands BLAS work large enough to share (its arrays are
vectors of a few resources and matrices of nodes by resources, which numpy's own loops compute), so
the pool only cost CPU: 0.04-0.1 s of every `kai` process on a 2-core machine, as its threads started
and spun. A `kai` program asks OpenBLAS for one thread before anything imports numpy, unless the
environment says otherwise (`OPENBLAS_NUM_THREADS`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

_quick = False
_program = False  # `kai` runs as a program (`run`), not in-process
_held: tuple[object, ...] = ()  # what the command built, held until `os._exit` (`end_quickly`)


def end_quickly(*built: object) -> None:
    """The running command holds nothing that needs the interpreter's own shutdown; when `kai` runs as a
    program, `built` (what the command built and is done with) is held until the process ends, so that
    the command's return does not free it object by object either."""
    global _quick, _held
    _quick = True
    if _program:
        _held = built


def run(main: Callable[[], object]) -> None:
    """Run the command group as the process (click's standalone mode ends it with SystemExit)."""
    global _program
    _program = True
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read once, when numpy is first imported
    try:
        main()
    except SystemExit as exc:
        if _quick and exc.code in (0, None):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                raise exc from None
            os._exit(0)
        raise
