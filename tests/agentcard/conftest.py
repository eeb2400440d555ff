"""Fixtures for the agentcard tests: committed vectors, sample cards, and a real key server on 127.0.0.1.

``key_server`` is one uvicorn per session serving a JWK Set the test controls plus misbehaving endpoints
(garbage, oversized, slow, dripping, redirecting, failing). ``tls_key_server`` serves the same app over
HTTPS with a self-signed certificate for 127.0.0.1, and ``tls_client`` trusts exactly that certificate, so
the HTTPS path runs without the development flag.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import gzip
import ipaddress
import json
import ssl
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from a2a_x402.agentcard import parse_card_json
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import bind_loopback, serve_asgi

VECTORS = Path(__file__).parent / "vectors"
SLOW_ANSWER_S = 5.0
"""How long `/slow` of the key server takes to answer: far beyond any timeout a test gives a fetch."""
DRIP_S = 5.0
"""How long `/drip` takes to send its body, a byte at a time, each one well within any read timeout."""
DRIP_BYTES = 100
"""How many bytes `/drip` sends in all."""

MERCHANT_CARD: dict[str, Any] = {
    "name": "Merchant Agent",
    "description": "Sells things — café ☕",
    "version": "1.0.0",
    "supportedInterfaces": [
        {"url": "https://shop.example/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://shop.example/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ],
    "capabilities": {
        "streaming": True,
        "pushNotifications": False,
        "extensions": [{"uri": "https://shop.example/ext/cart/v1", "params": {"maxItems": 10, "fee": 0.25}}],
    },
    "defaultInputModes": ["text/plain", "application/json"],
    "defaultOutputModes": ["application/json"],
    "skills": [{"id": "buy", "name": "Buy", "description": "Purchase items", "tags": ["commerce"]}],
}


def load_vector(name: str) -> dict[str, Any]:
    """A committed vector file, parsed with duplicate members refused."""
    return parse_card_json((VECTORS / name).read_bytes(), max_bytes=1 << 20)


def merchant_card(origin: str | None = None) -> dict[str, Any]:
    """A fresh copy of the sample card; with ``origin``, its interfaces live there."""
    card = copy.deepcopy(MERCHANT_CARD)
    if origin is not None:
        for interface in card["supportedInterfaces"]:
            interface["url"] = interface["url"].replace("https://shop.example", origin)
    return card


@dataclass
class KeyServer:
    """State behind the test key server; tests set ``jwks``/``card`` and read ``hits``."""

    base_url: str = ""
    jwks: dict[str, Any] = field(default_factory=lambda: {"keys": []})
    card: dict[str, Any] | None = None
    hits: Counter[str] = field(default_factory=Counter)
    slow_answered: int = 0
    """How many `/slow` requests got their answer: a fetch cut off by its deadline left before it."""
    dripped: int = 0
    """How many bytes `/drip` has sent, over all its requests: a fetch cut off early saw fewer than all."""

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    @property
    def jwks_url(self) -> str:
        return self.url("/.well-known/jwks.json")

    @property
    def card_url(self) -> str:
        """Where a card on this server is fetched: a ``jku`` on this origin is bound to the card."""
        return self.url("/.well-known/agent-card.json")

    def reset(self) -> None:
        self.jwks = {"keys": []}
        self.card = None
        self.hits.clear()
        self.slow_answered = self.dripped = 0


def key_server_app(state: KeyServer) -> Starlette:
    """The app: a controllable JWK Set and card, and endpoints that misbehave in one way each."""

    def counted(name: str, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            state.hits[name] += 1
            response: Response = await handler(request)
            return response

        return endpoint

    async def jwks(_: Request) -> Response:
        return JSONResponse(state.jwks)

    async def card(_: Request) -> Response:
        return Response(json.dumps(state.card, ensure_ascii=False), media_type="application/json")

    async def garbage(_: Request) -> Response:
        return Response("<html>not a key set</html>", media_type="text/html")

    async def not_a_jwks(_: Request) -> Response:
        return JSONResponse({"keys": "none"})

    async def duplicate_member(_: Request) -> Response:
        return Response(b'{"keys": [], "keys": []}', media_type="application/json")

    async def duplicate_kid(_: Request) -> Response:
        keys = state.jwks["keys"]
        return JSONResponse({"keys": keys + keys})

    async def huge(_: Request) -> Response:
        return Response(b'{"keys": [], "pad": "' + b"x" * (200 * 1024) + b'"}', media_type="application/json")

    async def huge_chunked(_: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"keys": [], "pad": "'
            for _ in range(200):
                yield b"x" * 1024
            yield b'"}'

        return StreamingResponse(chunks(), media_type="application/json")

    async def gzip_bomb(_: Request) -> Response:
        body = gzip.compress(b'{"keys": [], "pad": "' + b"0" * (10 * 1024 * 1024) + b'"}')
        return Response(body, media_type="application/json", headers={"content-encoding": "gzip"})

    async def slow(_: Request) -> Response:
        await asyncio.sleep(SLOW_ANSWER_S)
        state.slow_answered += 1
        return JSONResponse(state.jwks)

    async def drip(_: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(DRIP_BYTES):
                await asyncio.sleep(DRIP_S / DRIP_BYTES)
                state.dripped += 1
                yield b" "

        return StreamingResponse(chunks(), media_type="application/json")

    async def failing(_: Request) -> Response:
        return JSONResponse({"error": "down"}, status_code=500)

    async def redirect(_: Request) -> Response:
        return RedirectResponse("/.well-known/jwks.json", status_code=302)

    handlers = {
        "/.well-known/jwks.json": jwks,
        "/.well-known/agent-card.json": card,
        "/garbage": garbage,
        "/not-a-jwks": not_a_jwks,
        "/duplicate-member": duplicate_member,
        "/duplicate-kid": duplicate_kid,
        "/huge": huge,
        "/huge-chunked": huge_chunked,
        "/gzip-bomb": gzip_bomb,
        "/slow": slow,
        "/drip": drip,
        "/failing": failing,
        "/redirect": redirect,
    }
    return Starlette(routes=[Route(path, counted(path, handler)) for path, handler in handlers.items()])


@pytest.fixture(scope="session")
def _http_key_server() -> Iterator[KeyServer]:
    state = KeyServer()
    with serve_asgi(key_server_app(state)) as base_url:
        state.base_url = base_url
        yield state


@pytest.fixture
def key_server(_http_key_server: KeyServer) -> KeyServer:
    """The plain-HTTP key server on 127.0.0.1, reset for this test."""
    _http_key_server.reset()
    return _http_key_server


@dataclass(frozen=True)
class _Certificate:
    cert_path: Path
    key_path: Path


def _self_signed_loopback_certificate(directory: Path) -> _Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    paths = _Certificate(directory / "cert.pem", directory / "key.pem")
    paths.cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    paths.key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.fixture(scope="session")
def _tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KeyServer, _Certificate]]:
    # tests/fixtures/servers.serve_asgi has no TLS option, so this runs uvicorn with TLS the same way.
    certificate = _self_signed_loopback_certificate(tmp_path_factory.mktemp("tls"))
    state = KeyServer()
    sock = bind_loopback()
    config = uvicorn.Config(
        key_server_app(state),
        log_level="warning",
        ssl_certfile=str(certificate.cert_path),
        ssl_keyfile=str(certificate.key_path),
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + HANG_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("TLS key server did not start")
        time.sleep(0.005)
    state.base_url = f"https://127.0.0.1:{sock.getsockname()[1]}"
    try:
        yield state, certificate
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture
def tls_key_server(_tls: tuple[KeyServer, _Certificate]) -> KeyServer:
    """The HTTPS key server on 127.0.0.1, reset for this test."""
    state, _ = _tls
    state.reset()
    return state


@pytest.fixture
async def tls_client(_tls: tuple[KeyServer, _Certificate]) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client that trusts only the TLS key server's certificate."""
    context = ssl.create_default_context(cafile=str(_tls[1].cert_path))
    async with httpx.AsyncClient(timeout=HANG_S, verify=context) as client:
        yield client


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client for the HTTP key server."""
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        yield client
