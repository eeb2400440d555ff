"""Benchmarks of the project against reference software; run them with ``python -m bench.<name>``.

``bench.facilitator_bench`` measures the facilitator beside the x402 SDK's on one anvil chain;
``bench.merchant_bench`` measures paid tasks end to end beside the same flow on a bare a2a-sdk server.
Results go to stdout and to ``bench/results/`` (not versioned).
"""

from __future__ import annotations

__all__: list[str] = []
