"""Agents charging agents over A2A 1.0 with x402 payments settled on EVM chains.

Everything the distribution installs lives under this one namespace:

- `a2a_x402.extension`: the extension's wire contract (URIs, payment states, error codes, metadata).
- `a2a_x402.merchant`: the payment layer around any a2a-sdk `AgentExecutor`, and the reference merchant.
- `a2a_x402.payer`: the paying client.
- `a2a_x402.facilitator`: verification and settlement on any EVM node, in process or over HTTP.
- `a2a_x402.conformance`: the conformance kit that judges any merchant as a client sees it.
"""
