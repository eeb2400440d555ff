"""The committed artifacts are exactly what ``node devchain/build.mjs`` builds from the sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_committed_artifacts_are_up_to_date() -> None:
    node = shutil.which("node")
    assert node is not None, "node is needed to check the artifacts"
    result = subprocess.run(  # noqa: S603 - fixed command
        [node, "devchain/build.mjs", "--check"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
