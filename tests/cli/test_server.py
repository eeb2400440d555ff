"""`cli.Server`: a startup that fails raises the lifespan's exception, so the command answers it as it answers
every failure (a mistake in one line, exit status 2; anything else exit status 1) instead of uvicorn's
logged traceback and exit status 3."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SERVE = textwrap.dedent(
    """
    import socket, sys
    from contextlib import asynccontextmanager

    import click, uvicorn
    from starlette.applications import Starlette

    import cli

    @asynccontextmanager
    async def lifespan(app):
        if sys.argv[1] == "mistake":
            raise cli.ConfigError("is taken: pick another port", variable="X402_GRPC_PORT")
        raise RuntimeError("a bug")
        yield

    @click.command(cls=cli.Command)
    def serve():
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            config = uvicorn.Config(Starlette(lifespan=lifespan), log_config=None, log_level="warning")
            cli.Server(config).run(sockets=[listener])

    serve(args=[], prog_name="x402-test")
    """
)


def _serve(kind: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - a fixed script
        [sys.executable, "-c", _SERVE, kind], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_mistake_found_at_startup_is_one_line() -> None:
    ran = _serve("mistake")

    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == "x402-test: X402_GRPC_PORT is taken: pick another port\n"


def test_any_other_startup_failure_is_unexpected_with_one_traceback_in_the_log() -> None:
    ran = _serve("bug")

    assert ran.returncode == 1
    assert (
        ran.stderr.splitlines()[-1]
        == "x402-test: unexpected error (RuntimeError); the traceback is in the log"
    )
    assert ran.stderr.count("Traceback") == 1 and "RuntimeError: a bug" in ran.stderr
    assert "Application startup failed" not in ran.stderr
