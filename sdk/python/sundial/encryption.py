"""Client-side envelope encryption of payloads, results and error text
(docs/payloads.md, "Encryption"), interoperable with the Go library and the
TypeScript SDK.

An encrypted value is ``{"$sundial_enc": {"v": 1, "kid", "dek", "iv",
"ct"}}``: AES-256-GCM under a fresh 32-byte data key, which is itself
sealed by the keyring's primary key. An encrypted error text is the string
``"$sundial_enc:" + base64(JSON of that object)``.

AES-GCM comes from the ``cryptography`` package, an optional dependency
(``pip install 'sundial-sdk[crypto]'``, or Debian's python3-cryptography);
the rest of the SDK does not need it.
"""

import base64
import binascii
import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional

from .errors import SundialError

FIELD = "$sundial_enc"
TEXT_PREFIX = "$sundial_enc:"
VERSION = 1
PAYLOAD, RESULT, ERROR = "payload", "result", "error"

_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_NONCE = 12
_KEY = 32


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ImportError(
            "sundial encryption needs the 'cryptography' package (AES-GCM): "
            "pip install 'sundial-sdk[crypto]', or on Debian/Ubuntu apt-get install python3-cryptography"
        ) from exc
    return AESGCM


class EncryptionError(SundialError):
    """A value could not be decrypted: its key is missing from the keyring
    (:class:`MissingKey`), or it is tampered with or malformed."""

    def __init__(self, message: str, what: str, key_id: Optional[str]) -> None:
        super().__init__(message)
        self.what = what
        self.key_id = key_id


class MissingKey(EncryptionError):
    """The value was sealed under a key id this keyring lacks."""

    def __init__(self, what: str, key_id: str) -> None:
        super().__init__(f'{what} encrypted with key "{key_id}", which this keyring lacks', what, key_id)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _unb64(s: Any) -> bytes:
    if not isinstance(s, str):
        raise ValueError("not a string")
    return base64.b64decode(s.encode("ascii"), validate=True)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def valid_key_id(key_id: str) -> bool:
    """Whether ``key_id`` is 1 to 64 of ``[A-Za-z0-9_.-]``."""
    return bool(_KEY_ID.match(key_id))


def is_encrypted(value: Any) -> bool:
    """Whether a decoded JSON value is an encrypted value."""
    return isinstance(value, dict) and len(value) == 1 and FIELD in value


def is_encrypted_text(text: Any) -> bool:
    """Whether a text (a job's ``last_error``) holds an encrypted text."""
    return isinstance(text, str) and TEXT_PREFIX in text


def key_id(value: Any) -> Optional[str]:
    """The key id an encrypted value names, or None."""
    if not is_encrypted(value) or not isinstance(value[FIELD], dict):
        return None
    kid = value[FIELD].get("kid")
    return kid if isinstance(kid, str) else None


class Keyring:
    """Named 32-byte keys: the primary one encrypts, each one decrypts what
    was sealed under its id. Rotate by adding a key, making it primary and
    keeping the old ones. ``repr`` names the key ids, never the keys."""

    def __init__(self, keys: Mapping[str, bytes], primary: Optional[str] = None) -> None:
        if not keys:
            raise ValueError("keyring has no key")
        for kid, key in keys.items():
            if not valid_key_id(kid):
                raise ValueError(f"keyring key id {kid!r}: want 1 to 64 of [A-Za-z0-9_.-]")
            if len(key) != _KEY:
                raise ValueError(f"keyring key {kid!r}: want 32 bytes")
        self._keys: Dict[str, bytes] = dict(keys)
        ids = list(self._keys)
        if primary is not None and primary != "" and primary not in self._keys:
            raise ValueError(f"keyring primary {primary!r} is not a key of the keyring")
        self.primary: str = primary or ids[-1]

    @classmethod
    def parse(cls, text: str, primary: Optional[str] = None) -> "Keyring":
        """Reads ``"id:base64"`` entries separated by commas or newlines
        (blank lines and ``#`` lines skipped); the primary key is
        ``primary``, or else the last entry."""
        keys: Dict[str, bytes] = {}
        entries = [e.strip() for e in re.split(r"[,\n]", text)]
        for n, entry in enumerate((e for e in entries if e and not e.startswith("#")), 1):
            kid, sep, b64 = entry.partition(":")
            kid = kid.strip()
            if not sep or not valid_key_id(kid):
                raise ValueError(f"keyring entry {n}: want id:base64 with an id of 1 to 64 of [A-Za-z0-9_.-]")
            try:
                key = _unb64(b64.strip())
            except (ValueError, binascii.Error):
                key = b""
            if len(key) != _KEY:
                raise ValueError(f"keyring key {kid!r}: want the standard base64 of 32 bytes")
            if kid in keys:
                raise ValueError(f"keyring key {kid!r} is listed twice")
            keys[kid] = key
        return cls(keys, primary)

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> Optional["Keyring"]:
        """The keyring of ``SUNDIAL_KEYRING`` or ``SUNDIAL_KEYRING_FILE``,
        primary ``SUNDIAL_KEYRING_PRIMARY``; None when neither is set."""
        env = os.environ if environ is None else environ
        text, path, primary = (env.get("SUNDIAL_KEYRING", ""), env.get("SUNDIAL_KEYRING_FILE", ""),
                               env.get("SUNDIAL_KEYRING_PRIMARY", ""))
        if text and path:
            raise ValueError("SUNDIAL_KEYRING and SUNDIAL_KEYRING_FILE are both set: set one")
        if not text and not path:
            if primary:
                raise ValueError("SUNDIAL_KEYRING_PRIMARY is set without SUNDIAL_KEYRING or SUNDIAL_KEYRING_FILE")
            return None
        name = "SUNDIAL_KEYRING"
        if path:
            name = "SUNDIAL_KEYRING_FILE"
            with open(path, encoding="utf-8") as f:
                text = f.read()
        try:
            return cls.parse(text, primary or None)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None

    @property
    def ids(self) -> List[str]:
        return list(self._keys)

    def __repr__(self) -> str:
        return f"Keyring(ids={self.ids!r}, primary={self.primary!r})"

    def seal(self, what: str, value: Any) -> Dict[str, Any]:
        """Encrypts a JSON value as ``what`` (``"payload"``, ``"result"``)
        under a fresh data key wrapped by the primary key."""
        aesgcm = _aesgcm()
        dek = os.urandom(_KEY)
        wrap_nonce, iv = os.urandom(_NONCE), os.urandom(_NONCE)
        wrapped = aesgcm(self._keys[self.primary]).encrypt(wrap_nonce, dek, f"sundial.dek:{self.primary}".encode())
        ct = aesgcm(dek).encrypt(iv, _dumps(value), f"sundial:{what}".encode())
        return {FIELD: {"v": VERSION, "kid": self.primary, "dek": _b64(wrap_nonce + wrapped),
                        "iv": _b64(iv), "ct": _b64(ct)}}

    def open(self, what: str, value: Any) -> Any:
        """Decrypts an encrypted value sealed as ``what`` and returns the
        JSON value. Raises :class:`MissingKey` for a key id the keyring
        lacks, :class:`EncryptionError` for what does not decrypt."""
        if not is_encrypted(value) or not isinstance(value[FIELD], dict):
            raise EncryptionError(f"{what} is not a valid encrypted value", what, None)
        env = value[FIELD]
        kid = env.get("kid")
        if set(env) != {"v", "kid", "dek", "iv", "ct"} or not isinstance(kid, str) or not valid_key_id(kid):
            raise EncryptionError(f"{what} is not a valid encrypted value", what, None)
        if env.get("v") != VERSION:
            raise EncryptionError(f"{what} encrypted with key \"{kid}\" does not decrypt: envelope version "
                                  f"{env.get('v')}, this SDK reads {VERSION}", what, kid)
        kek = self._keys.get(kid)
        if kek is None:
            raise MissingKey(what, kid)
        aesgcm = _aesgcm()
        from cryptography.exceptions import InvalidTag

        def bad(reason: str) -> EncryptionError:
            return EncryptionError(f"{what} encrypted with key \"{kid}\" does not decrypt: {reason}", what, kid)
        try:
            wrapped, iv, ct = _unb64(env["dek"]), _unb64(env["iv"]), _unb64(env["ct"])
        except (ValueError, binascii.Error):
            raise bad("malformed dek, iv or ct") from None
        if len(iv) != _NONCE or len(wrapped) < _NONCE:
            raise bad("malformed dek, iv or ct")
        try:
            dek = aesgcm(kek).decrypt(wrapped[:_NONCE], wrapped[_NONCE:], f"sundial.dek:{kid}".encode())
        except InvalidTag:
            raise bad("the data key does not unwrap (tampered with, or another key under this id)") from None
        if len(dek) != _KEY:
            raise bad("the data key does not unwrap (tampered with, or another key under this id)")
        try:
            plain = aesgcm(dek).decrypt(iv, ct, f"sundial:{what}".encode())
        except InvalidTag:
            raise bad("the ciphertext does not authenticate (tampered with)") from None
        return json.loads(plain.decode("utf-8"))

    def seal_text(self, what: str, text: str) -> str:
        """Encrypts a text (an error) as ``"$sundial_enc:" + base64(JSON)``."""
        return TEXT_PREFIX + _b64(_dumps(self.seal(what, text)))

    def open_text(self, what: str, text: str) -> str:
        """Decrypts a text :meth:`seal_text` made, keeping any words before
        it (``"timeout after 30s: $sundial_enc:..."``); other text is
        returned as it is."""
        i = text.find(TEXT_PREFIX)
        if i < 0:
            return text
        try:
            value = json.loads(_unb64(text[i + len(TEXT_PREFIX):]).decode("utf-8"))
        except (ValueError, binascii.Error):
            raise EncryptionError(f"{what} is not a valid encrypted text", what, None) from None
        plain = self.open(what, value)
        if not isinstance(plain, str):
            raise EncryptionError(f"{what} is not an encrypted text", what, key_id(value))
        return text[:i] + plain

    def decrypt_job(self, job: Mapping[str, Any]) -> Dict[str, Any]:
        """A copy of a job (a dict of the API's fields) with its encrypted
        payload, result and last error decrypted."""
        out = dict(job)
        if is_encrypted(out.get("payload")):
            out["payload"] = self.open(PAYLOAD, out["payload"])
        if is_encrypted(out.get("result")):
            out["result"] = self.open(RESULT, out["result"])
        if isinstance(out.get("last_error"), str):
            out["last_error"] = self.open_text(ERROR, out["last_error"])
        return out


def seal_spec(keyring: Optional[Keyring], spec: Mapping[str, Any]) -> Dict[str, Any]:
    """A job spec with its payload sealed (unless absent or sealed already)."""
    out = dict(spec)
    if keyring is not None and out.get("payload") is not None and not is_encrypted(out["payload"]):
        out["payload"] = keyring.seal(PAYLOAD, out["payload"])
    return out

