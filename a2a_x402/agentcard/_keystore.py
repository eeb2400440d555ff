"""The merchant's key directory: signing keys on disk, their lifecycle and the JWK Set they publish.

Key lifecycle in a ``KeyStore``: every key is ``active`` (published in the JWKS and signing) until it is
``retired``. ``rotate()`` adds a key without retiring the old one, so for a while the card carries two
signatures and verifiers holding either the old or the new JWKS accept it. ``retire(kid)`` removes the key
from signing *and* from ``public_jwks()``: a retired key must no longer verify, and dropping it from the JWKS
is the one signal every verifier (ours, a2a-sdk's, anyone's) honours. Verifiers that cached the JWKS keep the
key until their cache expires (``JwksCache`` TTL); put the kid in their revocation set for an immediate stop.
The private key stays on disk, marked retired, for audit; it is never used again. The last active key cannot
be retired (rotate first), so the merchant never serves an unsigned card by accident.

Directory layout: one ``<kid>.json`` per key (mode 0600, directory 0700) holding the private JWK, status,
creation/retirement times (UTC) and a serial that orders keys newest first. Writes are atomic (temp file +
rename). The store is synchronous file I/O meant for the CLI and for start-up; in a running server call it
from a worker thread. It assumes one writer at a time.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from ._errors import KeyStoreError
from ._keys import SigningKey, generate_signing_key, signing_key_from_jwk
from ._parse import load_json_object

__all__ = ["KeyRecord", "KeyStatus", "KeyStore"]

logger = logging.getLogger(__name__)

_KEY_FILE_MAX_BYTES = 64 * 1024


class KeyStatus(StrEnum):
    """Where a key in the store is in its life."""

    ACTIVE = "active"
    RETIRED = "retired"


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One key of a ``KeyStore``, without its private material."""

    kid: str
    alg: str
    status: KeyStatus
    serial: int
    created_at: datetime
    retired_at: datetime | None


class KeyStore:
    """Signing keys kept in a directory; see the module docstring for the lifecycle and layout."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def generate(self, alg: str = "ES256") -> KeyRecord:
        """Create a new active key for ``alg`` (``ES256`` or ``EdDSA``); existing keys keep signing.

        Raises:
            KeyLoadError: ``alg`` is not one we sign with.
        """
        key = generate_signing_key(alg)
        entries = self._load()
        serial = max((record.serial for record, _ in entries), default=0) + 1
        record = KeyRecord(key.kid, key.alg, KeyStatus.ACTIVE, serial, datetime.now(UTC), None)
        self._write(record, key)
        logger.info("agent card signing key generated: kid=%s alg=%s", key.kid, key.alg)
        return record

    def rotate(self) -> KeyRecord:
        """Add a new active key with the algorithm of the newest active one; the old keys keep signing.

        Raises:
            KeyStoreError: there is no active key to rotate from (use ``generate``).
        """
        active = self.signing_keys()
        if not active:
            raise KeyStoreError(f"no active key in {self.directory}; generate one first")
        return self.generate(active[0].alg)

    def retire(self, kid: str) -> KeyRecord:
        """Stop signing with ``kid`` and drop it from the JWKS; its file stays, marked retired.

        Raises:
            KeyStoreError: no such key, it is already retired, or it is the last active key.
        """
        entries = {record.kid: (record, key) for record, key in self._load()}
        if kid not in entries:
            raise KeyStoreError(f"no key {kid!r} in {self.directory}")
        record, key = entries[kid]
        if record.status is KeyStatus.RETIRED:
            raise KeyStoreError(f"key {kid!r} is already retired")
        if sum(1 for other, _ in entries.values() if other.status is KeyStatus.ACTIVE) == 1:
            raise KeyStoreError(f"key {kid!r} is the last active key; rotate before retiring it")
        retired = KeyRecord(
            kid, record.alg, KeyStatus.RETIRED, record.serial, record.created_at, datetime.now(UTC)
        )
        self._write(retired, key)
        logger.info("agent card signing key retired: kid=%s", kid)
        return retired

    def records(self) -> list[KeyRecord]:
        """Every key, active and retired, newest first."""
        return [record for record, _ in self._load()]

    def signing_keys(self) -> list[SigningKey]:
        """The active keys, newest first: pass them to ``sign_card``."""
        return [key for record, key in self._load() if record.status is KeyStatus.ACTIVE]

    def public_jwks(self) -> dict[str, Any]:
        """The JWK Set to serve at ``/.well-known/jwks.json``: the public halves of the active keys."""
        return {"keys": [key.public_jwk() for key in self.signing_keys()]}

    def _load(self) -> list[tuple[KeyRecord, SigningKey]]:
        if not self.directory.is_dir():
            return []
        entries = [self._read(path) for path in self.directory.glob("*.json")]
        return sorted(entries, key=lambda entry: entry[0].serial, reverse=True)

    def _read(self, path: Path) -> tuple[KeyRecord, SigningKey]:
        try:
            obj = load_json_object(path.read_bytes(), max_bytes=_KEY_FILE_MAX_BYTES, what=str(path))
            key = signing_key_from_jwk(obj["jwk"], str(path))
            retired_at = obj["retired_at"]
            record = KeyRecord(
                kid=key.kid,
                alg=key.alg,
                status=KeyStatus(obj["status"]),
                serial=int(obj["serial"]),
                created_at=datetime.fromisoformat(obj["created_at"]),
                retired_at=datetime.fromisoformat(retired_at) if retired_at is not None else None,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise KeyStoreError(f"key file {path} is unreadable or corrupt: {exc}") from exc
        if path.stem != key.kid:
            raise KeyStoreError(f"key file {path} holds kid {key.kid!r}; the file name must match")
        return record, key

    def _write(self, record: KeyRecord, key: SigningKey) -> None:
        document = {
            "serial": record.serial,
            "status": record.status.value,
            "created_at": record.created_at.isoformat(),
            "retired_at": record.retired_at.isoformat() if record.retired_at else None,
            "jwk": key.private_jwk(),
        }
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        final = self.directory / f"{record.kid}.json"
        temporary = self.directory / f".{record.kid}.{secrets.token_hex(4)}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(_dump_json(document))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, final)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


def _dump_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
