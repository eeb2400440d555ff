"""`cli.Server`: a startup that fails raises the lifespan's exception, so the command answers it as it answers
every failure (a mistake in one line, exit status 2; anything else exit status 1) instead of uvicorn's
logged traceback and exit status 3."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import pytest

_SERVE = textwrap.dedent(
    """
    import socket, sys
    from contextlib import asynccontextmanager

    import click, uvicorn
    from starlette.applications import Starlette

    from a2a_x402 import cli
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


_STOPPABLE = textwrap.dedent(
    """
    import asyncio, logging, socket, sys

    import click, uvicorn
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from a2a_x402 import cli
    async def slow(request):
        print("in flight", flush=True)
        await asyncio.sleep(float(request.query_params["s"]))
        return PlainTextResponse("finished")

    @click.command(cls=cli.Command)
    def serve():
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            # Listening before the port is told: a request sent at once waits in the backlog while the
            # server starts (a loaded machine took longer than the test's client), instead of being refused.
            listener.listen()
            print(listener.getsockname()[1], flush=True)
            app = Starlette(routes=[Route("/slow", slow)])
            config = uvicorn.Config(app, log_config=None, log_level="warning")
            cli.Server(config).run(sockets=[listener])

    serve(args=[], prog_name="x402-test")
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_gracefully_in_one_line_with_exit_0_after_its_requests(
    sig: signal.Signals,
) -> None:
    server = subprocess.Popen(  # noqa: S603 - a fixed script
        [sys.executable, "-c", _STOPPABLE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        answers: list[httpx.Response] = []
        # The request sleeps long enough for the signal to arrive while it is in flight (it announces
        # itself first); its answer must still come whole.
        request = threading.Thread(
            target=lambda: answers.append(
                httpx.get(f"http://127.0.0.1:{port}/slow", params={"s": "1"}, timeout=60)
            )
        )
        request.start()
        assert server.stdout.readline() == "in flight\n"
        server.send_signal(sig)
        request.join(60)
        out, err = server.communicate(timeout=60)
    finally:
        server.kill()
    assert [(a.status_code, a.text) for a in answers] == [(200, "finished")]
    assert server.returncode == 0
    assert err == f"INFO x402-test x402-test stopped by {sig.name}: requests in flight were finished\n"
    assert "Aborted!" not in out + err


def test_a_second_ctrl_c_cuts_the_requests_in_flight_off_and_says_so() -> None:
    server = subprocess.Popen(  # noqa: S603 - a fixed script
        [sys.executable, "-c", _STOPPABLE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        # A request that would take far longer than the test: only the second Ctrl-C ends the server.
        url = f"http://127.0.0.1:{port}/slow?s=600"
        request = threading.Thread(target=_cut_off, args=(url,), daemon=True)
        request.start()
        assert server.stdout.readline() == "in flight\n"
        server.send_signal(signal.SIGINT)
        # Two signals sent at once may arrive as one: the second goes once the first closed the listener.
        _wait_refused(port)
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    finally:
        server.kill()
    # The cut-off requests' cancellations follow in uvicorn's words; the stop is said once, first.
    assert server.returncode == 0
    stops = [line for line in err.splitlines() if "stopped by" in line]
    said = "x402-test stopped by a second SIGINT: requests in flight were cut off"
    assert stops == [f"WARNING x402-test {said}"]
    assert "Aborted!" not in err


def _cut_off(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(url, timeout=60)


def _wait_refused(port: int) -> None:
    for _ in range(6000):  # up to a minute
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError(f"port {port} still accepts connections")
