"""The committed artifacts are exactly what ``node devchain/build.mjs`` builds from the sources, built for
Shanghai so every supported node (ganache 7.9 too) can deploy them: no Cancun-only opcode in any of them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_committed_artifacts_are_up_to_date() -> None:
    node = shutil.which("node")
    assert node is not None, "node is needed to check the artifacts"
    result = subprocess.run(  # noqa: S603 - fixed command
        [node, "a2a_x402/devchain/build.mjs", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# Opcodes a Shanghai node (ganache 7.9, say) does not know: Cancun's and later.
_CANCUN_ONLY = {0x49: "BLOBHASH", 0x4A: "BLOBBASEFEE", 0x5C: "TLOAD", 0x5D: "TSTORE", 0x5E: "MCOPY"}
_PUSH1, _PUSH32 = 0x60, 0x7F


def _opcodes(code: bytes) -> list[int]:
    """The opcodes of `code` in order, PUSH data skipped, the trailing CBOR metadata left out."""
    # solc appends CBOR metadata whose length is the last two bytes; it is data, never executed.
    end = len(code) - 2 - int.from_bytes(code[-2:], "big") if len(code) >= 2 else len(code)
    out: list[int] = []
    i = 0
    while i < end:
        op = code[i]
        out.append(op)
        i += 1 + (op - _PUSH1 + 1 if _PUSH1 <= op <= _PUSH32 else 0)
    return out


def _artifacts() -> list[Path]:
    return sorted((REPO_ROOT / "a2a_x402" / "devchain" / "artifacts").glob("*.json"))


def test_every_artifact_is_built_for_shanghai() -> None:
    assert _artifacts()
    for path in _artifacts():
        assert orjson.loads(path.read_bytes())["settings"]["evmVersion"] == "shanghai", path.name


@pytest.mark.parametrize("path", _artifacts(), ids=lambda p: p.stem)
def test_no_artifact_uses_an_opcode_a_shanghai_node_lacks(path: Path) -> None:
    code = bytes.fromhex(orjson.loads(path.read_bytes())["deployedBytecode"][2:])
    found = {_CANCUN_ONLY[op] for op in _opcodes(code) if op in _CANCUN_ONLY}
    assert not found, f"{path.name} uses {sorted(found)}"


def test_the_scan_finds_a_cancun_opcode_and_skips_push_data() -> None:
    metadata = bytes.fromhex("a1") + bytes(3) + (4).to_bytes(2, "big")
    assert 0x5E in _opcodes(bytes([0x60, 0x00, 0x5E]) + metadata)
    # 0x5e as PUSH1's data, and as metadata, is no opcode.
    assert 0x5E not in _opcodes(bytes([0x60, 0x5E, 0x00]) + metadata)
    assert 0x5E not in _opcodes(bytes([0x00]) + bytes([0x5E, 0x5E, 0x5E]) + (3).to_bytes(2, "big"))
