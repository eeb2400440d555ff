"""The merchant of the embedded flow's end-to-end tests (`shop`) and the user key its tenants trust."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.ap2 import new_key
from tests.fixtures.merchant import MerchantStarter, RunningMerchant
from tests.merchant.ap2.shop import write_tenants


@pytest.fixture
def user_key() -> Any:
    """The trusted surface's key, issuing the user's open mandates."""
    return new_key("trusted-surface")


@pytest.fixture
def shop(
    start_merchant: MerchantStarter, database_url: str, tmp_path: Path, user_key: Any
) -> RunningMerchant:
    """A merchant whose tenants are those of `shop.write_tenants`."""
    return start_merchant(database_url, tenants_file=write_tenants(tmp_path, user_key))
