"""`x402-a2a-conformance`: exit status, the three report files, and the payer key kept out of sight."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import Response

from a2a_x402.conformance.cli import main
from a2a_x402.devchain import DevChain
from tests.fixtures.conformance import serve_reference_merchant
from tests.fixtures.servers import free_port

from .hostile import hostile_app

SECRET = "0x" + "5e" * 32


@pytest.fixture(scope="module")
def reference_url(kit_chain: DevChain, kit_database: str, kit_folder: Path) -> Iterator[str]:
    """The reference merchant's base URL."""
    with serve_reference_merchant(kit_chain, kit_database, kit_folder) as url:
        yield url


def test_a_conforming_run_exits_0_and_writes_every_report(
    reference_url: str,
    kit_chain: DevChain,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)
    paths = {name: tmp_path / f"report.{name}" for name in ("json", "md", "xml")}
    argv = [reference_url, "--rpc-url", kit_chain.rpc_url, "--only", "card", "--only", "activation.refused"]
    argv += ["--json", str(paths["json"]), "--markdown", str(paths["md"]), "--junit", str(paths["xml"])]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "CONFORMS: every MUST passed" in out
    document = json.loads(paths["json"].read_text())
    assert document["conforms"] is True
    assert {r["id"] for r in document["results"]} >= {"card.served", "activation.refused"}
    assert paths["md"].read_text().startswith("# x402 A2A conformance report")
    suites = ET.fromstring(paths["xml"].read_text())  # noqa: S314 - the kit's own output
    assert suites.findall(".//failure") == []
    assert len(suites.findall(".//testcase")) == len(document["results"])
    for path in (*paths.values(),):
        assert SECRET.removeprefix("0x") not in path.read_text()


def test_a_failing_run_exits_1_with_the_failure_in_every_report(
    asgi_server: Callable[..., str],
    kit_chain: DevChain,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)
    url = asgi_server(hostile_app(card=[1]))
    junit, markdown = tmp_path / "r.xml", tmp_path / "r.md"
    assert (
        main([url, "--rpc-url", kit_chain.rpc_url, "--junit", str(junit), "--markdown", str(markdown)]) == 1
    )
    assert "DOES NOT CONFORM" in capsys.readouterr().out
    failures = ET.fromstring(junit.read_text()).findall(".//failure")  # noqa: S314 - the kit's own output
    messages = [f.get("message") or "" for f in failures]
    assert messages[0] == "no usable card: the card is not a JSON object"
    # The card's other MUSTs could not be checked: failed too, saying why.
    assert all(m.startswith("not reached: card.served failed") for m in messages[1:]) and messages[1:]
    assert "## Evidence of the failures" in markdown.read_text()


def test_the_key_comes_from_a_file_or_the_environment_never_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("X402_PAYER_KEY", raising=False)
    with pytest.raises(SystemExit) as missing:
        main(["http://127.0.0.1:9", "--rpc-url", "http://127.0.0.1:9"])
    assert missing.value.code == 2
    assert "no payer key" in capsys.readouterr().err
    bad = tmp_path / "key"
    bad.write_text("0xnot-a-key-but-secret\n")
    with pytest.raises(SystemExit) as invalid:
        main(["http://127.0.0.1:9", "--rpc-url", "http://127.0.0.1:9", "--payer-key-file", str(bad)])
    assert invalid.value.code == 2
    error = capsys.readouterr().err
    assert "not a valid secp256k1 private key" in error and "secret" not in error
    assert error.count("\n") == 1


def _refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line the kit refuses ``argv`` with (exit 2)."""
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("x402-a2a-conformance: error: ")
    assert SECRET.removeprefix("0x") not in captured.err
    return lines[0]


def test_a_dead_rpc_url_is_refused_in_one_line_before_the_merchant_is_asked_anything(
    asgi_server: Callable[..., str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)
    asked: list[str] = []

    async def card(request: Request) -> Response:
        asked.append(request.url.path)
        return Response("{}", media_type="application/json")

    url = asgi_server(hostile_app(card=card))
    dead = f"http://127.0.0.1:{free_port()}/"
    line = _refusal([url, "--rpc-url", dead], capsys)
    assert f"the chain at --rpc-url {dead} could not be reached (connection refused)" in line
    assert "check the URL and that the node runs" in line
    assert asked == []  # nothing signed, nothing sent: the merchant never heard of the run


def test_an_rpc_url_that_is_no_node_is_refused(
    asgi_server: Callable[..., str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)
    url = asgi_server(hostile_app())
    line = _refusal([url, "--rpc-url", url + "/a2a/jsonrpc"], capsys)
    assert "is not an Ethereum JSON-RPC node (eth_chainId answered HTTP 404 without a result)" in line


def test_a_merchant_at_a_closed_port_is_refused_in_one_line(
    kit_chain: DevChain, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)
    closed = f"http://127.0.0.1:{free_port()}"
    line = _refusal([closed, "--rpc-url", kit_chain.rpc_url], capsys)
    assert line.endswith(
        f"the merchant at {closed}/.well-known/agent-card.json could not be reached (connection refused): "
        "check the URL and that it runs"
    )
    assert "ConnectError" not in line


@pytest.mark.parametrize(
    ("status", "body", "media_type", "said"),
    [
        (404, "no", "text/plain", "answered HTTP 404: not an A2A agent"),
        (200, "<html>welcome</html>", "text/html; charset=utf-8", "answered a web page, not an Agent Card"),
    ],
)
def test_a_server_that_is_no_a2a_agent_is_refused_in_one_line(
    asgi_server: Callable[..., str],
    kit_chain: DevChain,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: int,
    body: str,
    media_type: str,
    said: str,
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)

    async def card(_request: Request) -> Response:
        return Response(body, status_code=status, media_type=media_type)

    url = asgi_server(hostile_app(card=card))
    assert said in _refusal([url, "--rpc-url", kit_chain.rpc_url], capsys)


def test_a_missing_or_unreadable_key_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("X402_PAYER_KEY", raising=False)
    monkeypatch.delenv("X402_PAYER_KEYS", raising=False)
    argv = ["http://127.0.0.1:9", "--rpc-url", "http://127.0.0.1:9"]
    assert "no payer key" in _refusal(argv, capsys)
    missing = tmp_path / "absent"
    line = _refusal([*argv, "--payer-key-file", str(missing)], capsys)
    assert line.endswith(f"cannot read the payer key file {missing}: no such file or directory")


def test_the_key_is_read_as_x402_pay_reads_it_the_first_of_x402_payer_keys(
    reference_url: str,
    kit_chain: DevChain,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("X402_PAYER_KEY", raising=False)
    monkeypatch.setenv("X402_PAYER_KEYS", "0xnot-a-key-but-secret,0x" + "11" * 32)
    argv = [reference_url, "--rpc-url", kit_chain.rpc_url, "--only", "card.served"]
    assert "not a valid secp256k1 private key" in _refusal(argv, capsys)  # the first one, as x402-pay
    monkeypatch.setenv("X402_PAYER_KEYS", f"{SECRET},0x" + "11" * 32)
    assert main(argv) == 0
    assert "CONFORMS" in capsys.readouterr().out
    monkeypatch.setenv("X402_PAYER_KEY", "0x" + "22" * 32)  # X402_PAYER_KEY wins over the list
    monkeypatch.setenv("X402_PAYER_KEYS", "0xnot-a-key")
    assert main(argv) == 0


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json " + SECRET, "is not JSON"),
        (
            json.dumps({"kty": "EC", "crv": "P-256", "x": "a", "y": "b", "kid": "k"}),
            "not a private EC P-256 JWK",
        ),
        (
            json.dumps({"kty": "EC", "crv": "P-256", "x": "a", "y": "b", "d": SECRET}),
            "not a private EC P-256 JWK",
        ),
        (
            json.dumps({"kty": "RSA", "n": "a", "e": "b", "d": SECRET, "kid": "k"}),
            "not a private EC P-256 JWK",
        ),
        (json.dumps([SECRET]), "not a private EC P-256 JWK"),
        (
            json.dumps({"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA", "d": SECRET, "kid": "k"}),
            "not a usable EC P-256 private JWK",
        ),
    ],
)
def test_an_unusable_ap2_issuer_key_is_refused_in_one_line_without_its_content(
    content: str,
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", "0x" + "11" * 32)
    key = tmp_path / "issuer.jwk"
    key.write_text(content)
    line = _refusal(
        ["http://127.0.0.1:9", "--rpc-url", "http://127.0.0.1:9", "--ap2-issuer-key", str(key)], capsys
    )
    assert says in line
    missing = _refusal(
        ["http://127.0.0.1:9", "--rpc-url", "http://127.0.0.1:9", "--ap2-issuer-key", str(tmp_path / "none")],
        capsys,
    )
    assert "cannot read the AP2 issuer key file" in missing
