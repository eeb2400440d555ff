"""The merchant's public Agent Card, one per protocol version: what it is built from and its served bytes.

The 1.0 card lists one interface per binding (JSON-RPC, HTTP+JSON) per served tenant at protocol version 1.0;
the default tenant's interfaces carry no `tenant` and come first, so a client that simply takes the first
interface talks to the default tenant. A2A 0.3 is served too, and the 1.0 card lists those interfaces last:
the default tenant's (when it exists) at the root URLs, then each named tenant's at its own URLs under
`paths.TENANT_ROOT_PATH`, carrying that `tenant`: a 0.3 request has no `tenant` field, so there the URL
routes, and the interface's `tenant` says whose it is (a2a-sdk's 0.3 transports send none). The 0.3 card
is the 0.3 shape of the default tenant's agent: `url` and `preferredTransport` (JSON-RPC),
`protocolVersion: "0.3"`, and `additionalInterfaces` listing both 0.3 interfaces. Capabilities are fixed
by what the edge implements: streaming yes, push notifications no. Extension declarations are supplied by
the caller per version (`extensions` for 1.0, `extensions_v0_3` for 0.3): an extension URI names one
version of the extension.

Each named tenant also has cards of its own, served under its root (`build_tenant_agent_card`): in 0.3,
the 0.3 card of its 0.3 interfaces, for a 0.3 client; in 1.0, its interfaces of both versions. Their
extension declarations are the tenant's (`tenant_extensions_v0_3`, `tenant_extensions`; the reference
merchant: only that tenant's payTo), or the shared ones when those are unset.

With `grpc_url` set, each tenant's 1.0 interfaces end with a third one, GRPC at `host:port`.

With `tenant_extensions` set, each tenant also has an extended Agent Card (A2A 1.0 `GetExtendedAgentCard`,
`build_extended_agent_card`): the same agent with only that tenant's 1.0 interfaces and the extension
declarations `tenant_extensions` gives for it, and the 1.0 cards declare `capabilities.extendedAgentCard`.
The 0.3 cards do not: the extended card is a 1.0 operation.

`render_agent_card` is the one place that turns a card into the exact bytes served for its version (and
so the bytes a signature must cover), and `render_versionless_agent_card` the one that writes the card for
requests naming no version (a 0.3 client, or a 1.0 client without `A2A-Version`): the 0.3 card with the
1.0 card's interfaces and extension declarations beside its 0.3 members. The 1.0 card is written with
plain `MessageToDict`, never the SDK's `agent_card_to_dict`, which would merge the 0.3 fields into a 1.0
card that lists a 0.3 interface.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
from a2a.compat.v0_3.conversions import to_compat_agent_card, to_compat_agent_interface
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict

from a2a_x402.merchant.tenants import DEFAULT_TENANT, TenantRegistry

from ._card_security import declare_security
from ._numbers import restore_integers
from .paths import JSONRPC_PATH, REST_PATH, tenant_root
from .versions import ProtocolVersion

__all__ = [
    "AgentCardSettings",
    "CardSettingsError",
    "build_agent_card",
    "build_extended_agent_card",
    "build_tenant_agent_card",
    "render_agent_card",
    "render_versionless_agent_card",
    "served_versions",
]

_DEFAULT_MODES = ("text/plain", "application/json")
# Preferred binding first: the SDK client picks the first interface it supports.
_BINDINGS = ((TransportProtocol.JSONRPC.value, JSONRPC_PATH), (TransportProtocol.HTTP_JSON.value, REST_PATH))
_GRPC_URL = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}")


class CardSettingsError(ValueError):
    """The Agent Card settings are invalid."""

    code = "card_settings_invalid"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCardSettings:
    """What the operator says about the agent; the edge adds interfaces and capabilities.

    `base_url` is the public origin (and optional path prefix) clients reach the app at, for example
    `https://shop.example`; interface URLs are built from it. `grpc_url`, when the gRPC binding is served,
    is its `host:port` (a gRPC interface URL has no scheme); each tenant then gets a third 1.0
    interface, GRPC, after the two HTTP ones. `extensions` go into the 1.0 card's
    `capabilities.extensions` as given, `extensions_v0_3` into the 0.3 card's; `tenant_extensions`, when
    set, gives a tenant id's extended card and its own 1.0 card their extension declarations, and
    `tenant_extensions_v0_3` a named tenant's 0.3 card its own (each falls back to the shared declarations
    of its version when unset). `caller_schemes` are the security schemes callers authenticate with
    (`_card_security`; `create_app` fills them in from its authenticator): on the root 1.0 card, which
    speaks for every tenant, all of them; `tenant_caller_schemes`, when set, gives those of one tenant, for
    the cards that speak for it alone (its own, its extended card, the 0.3 root card of the default
    tenant), since a tenant's own JWT issuer is trusted nowhere else. Raises `CardSettingsError`
    on an empty name, description, version or skill list, a base URL that is not an absolute http(s)
    URL, or a `grpc_url` that is not `host:port`.
    """

    name: str
    description: str
    version: str
    base_url: str
    skills: Sequence[AgentSkill]
    grpc_url: str | None = None
    extensions: Sequence[AgentExtension] = ()
    extensions_v0_3: Sequence[AgentExtension] = ()
    tenant_extensions: Callable[[str], Sequence[AgentExtension]] | None = None
    tenant_extensions_v0_3: Callable[[str], Sequence[AgentExtension]] | None = None
    default_input_modes: Sequence[str] = _DEFAULT_MODES
    default_output_modes: Sequence[str] = _DEFAULT_MODES
    provider: AgentProvider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    caller_schemes: Sequence[str] = ()
    tenant_caller_schemes: Callable[[str], Sequence[str]] | None = None

    def schemes_at(self, tenant: str) -> Sequence[str]:
        """The security schemes the cards speaking for `tenant` alone declare."""
        if self.tenant_caller_schemes is None:
            return self.caller_schemes
        return self.tenant_caller_schemes(tenant)

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
        if self.grpc_url is not None and not _GRPC_URL.fullmatch(self.grpc_url):
            raise CardSettingsError(f"card grpc_url must be host:port, got {self.grpc_url!r}")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))


def served_versions(tenants: TenantRegistry) -> tuple[ProtocolVersion, ...]:
    """The protocol versions served at the root URLs: 1.0, and 0.3 when there is a default tenant (a 0.3
    request names no tenant; named tenants are served 0.3 under their own roots)."""
    if DEFAULT_TENANT in tenants:
        return (ProtocolVersion.V1_0, ProtocolVersion.V0_3)
    return (ProtocolVersion.V1_0,)


def _interfaces(settings: AgentCardSettings, tenants: TenantRegistry) -> list[AgentInterface]:
    urls = [(binding, settings.base_url + path) for binding, path in _BINDINGS]
    if settings.grpc_url is not None:
        urls.append((TransportProtocol.GRPC.value, settings.grpc_url))
    interfaces = [
        AgentInterface(
            url=url,
            protocol_binding=binding,
            protocol_version=ProtocolVersion.V1_0.value,
            tenant=tenant.id,
        )
        for tenant in tenants
        for binding, url in urls
    ]
    interfaces.extend(
        AgentInterface(
            url=settings.base_url + (tenant_root(tenant.id) if tenant.id else "") + path,
            protocol_binding=binding,
            protocol_version=ProtocolVersion.V0_3.value,
            tenant=tenant.id,
        )
        for tenant in tenants
        for binding, path in _BINDINGS
    )
    return interfaces


def build_agent_card(
    settings: AgentCardSettings, tenants: TenantRegistry, version: ProtocolVersion = ProtocolVersion.V1_0
) -> AgentCard:
    """The Agent Card for `settings` and `tenants` in `version`, as an A2A 1.0 `AgentCard` message.

    For 1.0: every interface of every served version, every tenant's. For 0.3: only the default tenant's
    0.3 interfaces and the 0.3 extension declarations, ready for `render_agent_card` to write in the 0.3
    shape.

    Raises:
        CardSettingsError: `version` is not served to `tenants` (0.3 needs the default tenant).
    """
    if version not in served_versions(tenants):
        raise CardSettingsError(f"A2A {version} is not served: it needs a default tenant")
    interfaces = _interfaces(settings, tenants)
    if version is ProtocolVersion.V0_3:
        interfaces = [
            i
            for i in interfaces
            if i.protocol_version == ProtocolVersion.V0_3.value and i.tenant == DEFAULT_TENANT
        ]
        anonymous = tenants.require(DEFAULT_TENANT).anonymous_callers
        schemes = settings.schemes_at(DEFAULT_TENANT)
        return _card(
            settings,
            interfaces,
            settings.extensions_v0_3,
            extended=False,
            anonymous=anonymous,
            schemes=schemes,
        )
    return _card(
        settings,
        interfaces,
        settings.extensions,
        extended=settings.tenant_extensions is not None,
        anonymous=any(tenant.anonymous_callers for tenant in tenants),
        schemes=settings.caller_schemes,
    )


def build_tenant_agent_card(
    settings: AgentCardSettings, tenants: TenantRegistry, tenant: str, version: ProtocolVersion
) -> AgentCard:
    """The named `tenant`'s own Agent Card in `version`, served under its root.

    For 0.3: its 0.3 interfaces and `tenant_extensions_v0_3(tenant)` (else `extensions_v0_3`), for a 0.3
    client, which has no other way to reach the tenant. For 1.0: its interfaces of both versions and
    `tenant_extensions(tenant)` (else `extensions`).

    Raises:
        CardSettingsError: `tenant` is the default tenant or not in `tenants`.
    """
    if tenant == DEFAULT_TENANT or tenant not in tenants:
        raise CardSettingsError(f"no named tenant {tenant!r} to build a card for")
    interfaces = [i for i in _interfaces(settings, tenants) if i.tenant == tenant]
    anonymous = tenants.require(tenant).anonymous_callers
    schemes = settings.schemes_at(tenant)
    if version is ProtocolVersion.V0_3:
        interfaces = [i for i in interfaces if i.protocol_version == ProtocolVersion.V0_3.value]
        own_v0_3 = settings.tenant_extensions_v0_3
        extensions_v0_3 = own_v0_3(tenant) if own_v0_3 else settings.extensions_v0_3
        return _card(
            settings, interfaces, extensions_v0_3, extended=False, anonymous=anonymous, schemes=schemes
        )
    own = settings.tenant_extensions
    extensions = own(tenant) if own else settings.extensions
    return _card(
        settings, interfaces, extensions, extended=own is not None, anonymous=anonymous, schemes=schemes
    )


def build_extended_agent_card(settings: AgentCardSettings, tenants: TenantRegistry, tenant: str) -> AgentCard:
    """`tenant`'s extended Agent Card (A2A 1.0): its own 1.0 interfaces and `tenant_extensions(tenant)`.

    Raises:
        CardSettingsError: `settings` has no `tenant_extensions`, or `tenant` is not in `tenants`.
    """
    if settings.tenant_extensions is None:
        raise CardSettingsError("extended cards need tenant_extensions in the card settings")
    if tenant not in tenants:
        raise CardSettingsError(f"no tenant {tenant!r} to build an extended card for")
    interfaces = [
        i
        for i in _interfaces(settings, tenants)
        if i.tenant == tenant and i.protocol_version == ProtocolVersion.V1_0.value
    ]
    anonymous = tenants.require(tenant).anonymous_callers
    extensions = settings.tenant_extensions(tenant)
    return _card(
        settings,
        interfaces,
        extensions,
        extended=True,
        anonymous=anonymous,
        schemes=settings.schemes_at(tenant),
    )


def _card(
    settings: AgentCardSettings,
    interfaces: Sequence[AgentInterface],
    extensions: Sequence[AgentExtension],
    *,
    extended: bool,
    anonymous: bool,
    schemes: Sequence[str],
) -> AgentCard:
    capabilities = AgentCapabilities(streaming=True, push_notifications=False, extensions=list(extensions))
    if extended:
        capabilities.extended_agent_card = True
    card = AgentCard(
        name=settings.name,
        description=settings.description,
        version=settings.version,
        supported_interfaces=list(interfaces),
        capabilities=capabilities,
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
    declare_security(card, schemes, anonymous=anonymous)
    return card


def render_agent_card(card: AgentCard, version: ProtocolVersion) -> bytes:
    """The exact bytes served for `card` (from `build_agent_card` for `version`) to clients of `version`.

    Integral numbers stay integers (a `Struct` in extension params stores them as doubles). For 0.3 the
    first 0.3 interface becomes `url`/`preferredTransport` and every 0.3 interface, that one included, is
    listed in `additionalInterfaces`, as the 0.3 specification recommends.
    """
    document = MessageToDict(card) if version is ProtocolVersion.V1_0 else _v0_3_document(card)
    return orjson.dumps(restore_integers(document))


def render_versionless_agent_card(card_v1_0: AgentCard, card_v0_3: AgentCard) -> bytes:
    """The exact bytes served to a card request that names no A2A version: one card for both versions.

    A 0.3 client fetches the card without `A2A-Version`, and so does a 1.0 client that forgot it. The card
    is the 0.3 document of `card_v0_3` exactly (a 0.3 client reads what it always read), plus what a 1.0
    client reads: `supportedInterfaces` of `card_v1_0` (every interface, both versions) and its
    `capabilities.extendedAgentCard`. `capabilities.extensions` holds the 0.3 declarations first, then
    those of 1.0 whose URI is not already there: as A2A's single card for both versions, under the
    extension's coexistence rules (spec/v0.3.md §13) each declaration's `required` applies only to the
    interfaces of its own protocol version.
    """
    document = _v0_3_document(card_v0_3)
    current = MessageToDict(card_v1_0)
    document["supportedInterfaces"] = current["supportedInterfaces"]
    capabilities = document.setdefault("capabilities", {})
    declared = capabilities.get("extensions", [])
    uris = {declaration["uri"] for declaration in declared}
    added = [e for e in current.get("capabilities", {}).get("extensions", []) if e["uri"] not in uris]
    if declared or added:
        capabilities["extensions"] = [*declared, *added]
    if card_v1_0.capabilities.extended_agent_card:
        capabilities["extendedAgentCard"] = True
    return orjson.dumps(restore_integers(document))


def _v0_3_document(card: AgentCard) -> dict[str, Any]:
    legacy = [i for i in card.supported_interfaces if i.protocol_version == ProtocolVersion.V0_3.value]
    compat = to_compat_agent_card(card)
    compat.additional_interfaces = [to_compat_agent_interface(i) for i in legacy]
    compat.protocol_version = ProtocolVersion.V0_3.value
    document: dict[str, Any] = compat.model_dump(mode="json", by_alias=True, exclude_none=True)
    return document
