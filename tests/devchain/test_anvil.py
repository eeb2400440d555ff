"""AnvilNode start-up, clean-up and errors, and the rollback the ``chain`` fixture relies on."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import ANVIL_DEV_KEYS, AnvilNode, AnvilNotFoundError, AnvilStartError, DevChain
from tests.fixtures.chain import rolled_back
from tests.fixtures.servers import bind_loopback, free_port


def test_node_serves_and_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a private cache path, anvil persists old block states under ~/.foundry and never
    # deletes them; a few hundred blocks are enough to trigger that.
    monkeypatch.setenv("HOME", str(tmp_path))
    with AnvilNode(chain_id=1337) as node:
        state_dir, pid = node.state_dir, node.pid
        assert node.rpc_url == f"http://127.0.0.1:{node.port}"
        assert node.rpc("eth_chainId") == hex(1337)
        node.rpc("anvil_mine", [hex(600)])
        assert state_dir is not None and (state_dir / "anvil.log").is_file()
    assert not node.running
    assert not state_dir.exists()
    assert not any(tmp_path.rglob("*"))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_missing_binary_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X402_ANVIL_BIN", str(tmp_path / "anvil"))
    with pytest.raises(AnvilNotFoundError, match="X402_ANVIL_BIN") as excinfo:
        AnvilNode()
    assert excinfo.value.code == "anvil_not_found"


def test_binary_that_exits_is_a_start_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    false = shutil.which("false")
    assert false is not None
    monkeypatch.setenv("X402_ANVIL_BIN", false)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    node = AnvilNode()
    with pytest.raises(AnvilStartError) as excinfo:
        node.start()
    assert excinfo.value.code == "anvil_start_failed"
    assert not node.running
    assert list(tmp_path.iterdir()) == []


def test_rollback_restores_state_mining_mode_and_base_fee(chain: DevChain) -> None:
    rpc, holder = chain.rpc, Account.create().address
    next_base_fee = rpc.call("eth_getBlockByNumber", ["pending", False])["baseFeePerGas"]
    with rolled_back(rpc):
        chain.mint(holder, 5)
        rpc.call("anvil_setNextBlockBaseFeePerGas", [hex(500 * 10**9)])
        rpc.call("evm_mine")
        rpc.call("evm_setAutomine", [False])
        # The sender's first transaction in the block, so it would still be minable after the revert.
        rpc.send_transaction(ANVIL_DEV_KEYS[3], to=holder, data=b"", value_wei=1)

    assert chain.balance_of(holder) == 0
    assert rpc.call("anvil_getAutomine") is True
    assert rpc.call("eth_getBlockByNumber", ["pending", False])["baseFeePerGas"] == next_base_fee
    rpc.call("evm_mine")
    assert rpc.call("eth_getBalance", [holder, "latest"]) == "0x0"


def test_node_listens_on_the_port_it_is_given() -> None:
    port = free_port()
    with AnvilNode(chain_id=1337, port=port) as node:
        assert node.rpc_url == f"http://127.0.0.1:{port}"
        assert node.rpc("eth_chainId") == hex(1337)


def test_a_taken_port_is_a_start_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with bind_loopback(free_port()) as holder:
        holder.listen()
        port = holder.getsockname()[1]
        node = AnvilNode(port=port)
        with pytest.raises(AnvilStartError, match=f"^port {port} on 127.0.0.1 is taken by another process$"):
            node.start()
    assert not node.running
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_that_is_no_port_is_refused(port: int) -> None:
    with pytest.raises(ValueError, match="is not a TCP port"):
        AnvilNode(port=port)
