"""Compiled contract artifacts under ``devchain/artifacts``, rebuilt by ``node devchain/build.mjs``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Artifact", "load_artifact"]

_ARTIFACTS_DIR = Path(__file__).resolve().parent / "artifacts"


@dataclass(frozen=True)
class Artifact:
    """ABI and bytecode of one contract; bytecodes are ``0x`` hex."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: str
    deployed_bytecode: str


def load_artifact(name: str) -> Artifact:
    """Load ``devchain/artifacts/<name>.json``, e.g. ``load_artifact("DevUSDC")``.

    Raises:
        FileNotFoundError: there is no artifact of that name.
    """
    data = json.loads((_ARTIFACTS_DIR / f"{name}.json").read_text())
    return Artifact(
        name=data["contractName"],
        abi=data["abi"],
        bytecode=data["bytecode"],
        deployed_bytecode=data["deployedBytecode"],
    )
