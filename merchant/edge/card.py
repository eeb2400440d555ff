"""The merchant's public Agent Card: what it is built from and how tenants become interfaces.

The card lists one interface per binding (JSON-RPC, HTTP+JSON) per served tenant, all at protocol version
1.0; the default tenant's interfaces carry no `tenant` and come first, so a client that simply takes the
first interface talks to the default tenant. Capabilities are fixed by what the edge implements: streaming
yes, push notifications no. Extension declarations (the x402 payment extension) are supplied by the caller.

The protocol version is set on every interface on purpose: an interface without one makes the SDK merge
0.3 legacy fields into the served JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from merchant.tenants import TenantRegistry

from .paths import JSONRPC_PATH, REST_PATH

__all__ = ["AgentCardSettings", "CardSettingsError", "build_agent_card"]

_DEFAULT_MODES = ("text/plain", "application/json")
# Preferred binding first: the SDK client picks the first interface it supports.
_BINDINGS = ((TransportProtocol.JSONRPC.value, JSONRPC_PATH), (TransportProtocol.HTTP_JSON.value, REST_PATH))


class CardSettingsError(ValueError):
    """The Agent Card settings are invalid."""

    code = "card_settings_invalid"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCardSettings:
    """What the operator says about the agent; the edge adds interfaces and capabilities.

    `base_url` is the public origin (and optional path prefix) clients reach the app at, for example
    `https://shop.example`; interface URLs are built from it. `extensions` go into
    `capabilities.extensions` as given. Raises `CardSettingsError` on an empty name, description, version
    or skill list, or a base URL that is not an absolute http(s) URL.
    """

    name: str
    description: str
    version: str
    base_url: str
    skills: Sequence[AgentSkill]
    extensions: Sequence[AgentExtension] = ()
    default_input_modes: Sequence[str] = _DEFAULT_MODES
    default_output_modes: Sequence[str] = _DEFAULT_MODES
    provider: AgentProvider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None

    def __post_init__(self) -> None:
        for name in ("name", "description", "version"):
            if not getattr(self, name).strip():
                raise CardSettingsError(f"card {name} must not be empty")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
            raise CardSettingsError(
                "card base_url must be an absolute http(s) URL without query or fragment, "
                f"got {self.base_url!r}"
            )
        if not self.skills:
            # REQUIRED list fields need at least one entry (A2A §5.7); the SDK warns about an empty one.
            raise CardSettingsError("card skills must not be empty")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))


def build_agent_card(settings: AgentCardSettings, tenants: TenantRegistry) -> AgentCard:
    """The Agent Card for `settings`: one JSON-RPC and one HTTP+JSON interface per tenant in `tenants`."""
    interfaces = [
        AgentInterface(
            url=settings.base_url + path,
            protocol_binding=binding,
            protocol_version=PROTOCOL_VERSION_1_0,
            tenant=tenant.id,
        )
        for tenant in tenants
        for binding, path in _BINDINGS
    ]
    card = AgentCard(
        name=settings.name,
        description=settings.description,
        version=settings.version,
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=False, extensions=list(settings.extensions)
        ),
        default_input_modes=list(settings.default_input_modes),
        default_output_modes=list(settings.default_output_modes),
        skills=list(settings.skills),
    )
    if settings.provider is not None:
        card.provider.CopyFrom(settings.provider)
    if settings.documentation_url is not None:
        card.documentation_url = settings.documentation_url
    if settings.icon_url is not None:
        card.icon_url = settings.icon_url
    return card
