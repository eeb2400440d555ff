"""`x402-a2a-conformance`: exit status, the three report files, and the payer key kept out of sight."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devchain import DevChain
from tests.fixtures.conformance import serve_reference_merchant
from x402_a2a_conformance.cli import main

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
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("X402_PAYER_KEY", SECRET)
    url = asgi_server(hostile_app(card=[1]))
    junit, markdown = tmp_path / "r.xml", tmp_path / "r.md"
    assert (
        main([url, "--rpc-url", "http://127.0.0.1:9/", "--junit", str(junit), "--markdown", str(markdown)])
        == 1
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
