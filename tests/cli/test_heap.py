"""`cli.Server`: once the app has started, the heap is frozen out of the collector and young collections
are spaced out; the process that imports it (a test's, a library user's) keeps CPython's defaults."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

from a2a_x402.cli import YOUNG_THRESHOLD

_SERVE_AND_REPORT = textwrap.dedent(
    """
    import asyncio, gc, socket
    import uvicorn
    from a2a_x402.cli import Server

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    async def main():
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        server = Server(uvicorn.Config(app, log_level="warning"))
        print(gc.get_threshold()[0], gc.get_freeze_count() > 0)
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        print(gc.get_threshold()[0], gc.get_freeze_count() > 0)
        server.should_exit = True
        await serving

    asyncio.run(main())
    """
)


def test_serving_settles_the_heap_once_the_app_has_started() -> None:
    ran = subprocess.run(  # noqa: S603 - a fixed script
        [sys.executable, "-c", _SERVE_AND_REPORT], capture_output=True, text=True, timeout=60, check=True
    )

    before, after = ran.stdout.split("\n")[:2]
    assert before == f"{gc.get_threshold()[0]} False"
    assert after == f"{YOUNG_THRESHOLD} True"


def test_importing_it_changes_nothing_in_the_importing_process() -> None:
    assert gc.get_threshold()[0] != YOUNG_THRESHOLD
    assert gc.get_freeze_count() == 0
