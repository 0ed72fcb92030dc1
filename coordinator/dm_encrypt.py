"""Passwords produced by ``dmctl encrypt``, decrypted so a DM user's files work unchanged.

DM's format (``dm/pkg/encrypt`` + ``dm/pkg/utils``): base64 (standard alphabet) of
``IV (16 bytes) + "@" + AES-256-CFB(plaintext)``.  The key is DM-master's ``secret-key-path``
file (64 hex characters) since DM v8.0; before that dmctl used one key built into DM, which is
what DM's own sample files (``dm/master/source.yaml``) were encrypted with.  Here the key file is
named by the environment variable ``SHARDMERGE_DM_SECRET_KEY_PATH`` of the process that reads the
file (master, worker, shardctl); without it the built-in key of DM before v8.0 is used.

Like DM, a value that does not have that shape is a plain password.  A value that has it but
does not decrypt to text is refused (:class:`DecryptError`): a wrong key would otherwise be
sent to the server as a garbled password.  The AES block function is written out here (only
the forward cipher: CFB decryption uses it too) so no crypto package is needed for this.
"""
from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from coordinator.errors import ShardMergeError

KEY_ENV = "SHARDMERGE_DM_SECRET_KEY_PATH"
# DM's key before v8.0 (dm/pkg/encrypt, removed by tiflow#9494): dmctl <= v7.x encrypted with it
LEGACY_KEY_HEX = "a529b7665997f043a30ac8fadcb51d6aa032c226ab5b7750530b12b8c1a16a48"


class DecryptError(ShardMergeError):
    """A value shaped like a ``dmctl encrypt`` ciphertext that cannot be decrypted."""


def looks_encrypted(value: str) -> bool:
    """DM's ciphertext shape: base64 of 16 bytes, ``@``, at least one byte."""
    raw = _b64(value)
    return raw is not None and len(raw) > 17 and raw[16:17] == b"@"


def _b64(value: str) -> bytes | None:
    if not value or len(value) % 4:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def secret_key() -> tuple[bytes, str]:
    """(key, where it came from)."""
    path = os.environ.get(KEY_ENV, "")
    if not path:
        return bytes.fromhex(LEGACY_KEY_HEX), "the key built into DM before v8.0"
    try:
        text = Path(path).read_text().strip()
        key = bytes.fromhex(text)
    except OSError as e:
        raise DecryptError(f"cannot read the DM secret key file {path!r} (from {KEY_ENV}): {e.strerror}") from None
    except ValueError:
        raise DecryptError(f"the DM secret key file {path!r} (from {KEY_ENV}) must hold 64 hexadecimal "
                           f"characters (an AES-256 key), as DM-master's secret-key-path does") from None
    if len(key) != 32:
        raise DecryptError(f"the DM secret key file {path!r} (from {KEY_ENV}) holds {len(key)} bytes; "
                           f"an AES-256 key is 32 bytes (64 hexadecimal characters)")
    return key, f"the key in {path} ({KEY_ENV})"


def decrypt(value: str) -> str:
    """The plain text of a ``dmctl encrypt`` ciphertext (call :func:`looks_encrypted` first)."""
    raw = _b64(value)
    if raw is None or len(raw) <= 17 or raw[16:17] != b"@":
        raise DecryptError("not a dmctl-encrypted value (base64 of IV + '@' + ciphertext)")
    key, where = secret_key()
    plain = cfb_decrypt(key, raw[:16], raw[17:])
    try:
        text = plain.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if not text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise DecryptError(f"looks like a password encrypted by `dmctl encrypt` but does not decrypt to text "
                           f"with {where}; if DM-master had `secret-key-path`, set {KEY_ENV} to that key file "
                           f"for the shardmerge master and workers, or give the plain password (or "
                           f"`password-file` / `password-env`)")
    return text


def encrypt(plaintext: str) -> str:
    """``dmctl encrypt``: the ciphertext DM (and shardmerge) accept in a config's password,
    with the same key :func:`decrypt` uses (a fresh random IV each time)."""
    if not plaintext:
        raise DecryptError("nothing to encrypt: give the password as the argument")
    key, _ = secret_key()
    iv = os.urandom(16)
    return base64.b64encode(iv + b"@" + cfb_encrypt(key, iv, plaintext.encode("utf-8"))).decode("ascii")


def cfb_encrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    """AES-CFB (128-bit segments, Go's ``cipher.NewCFBEncrypter``) encryption: each block is
    the plain text XOR the cipher of the previous *ciphertext* block (the IV first)."""
    rk = _expand(key)
    out = bytearray()
    prev = iv
    for i in range(0, len(data), 16):
        ks = _encrypt_block(rk, prev)
        block = bytes(a ^ b for a, b in zip(data[i:i + 16], ks))
        out += block
        prev = block
    return bytes(out)


def cfb_decrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    """AES-CFB (128-bit segments, Go's ``cipher.NewCFBDecrypter``) decryption."""
    rk = _expand(key)
    out = bytearray()
    prev = iv
    for i in range(0, len(data), 16):
        block = data[i:i + 16]
        ks = _encrypt_block(rk, prev)
        out += bytes(a ^ b for a, b in zip(block, ks))
        prev = block
    return bytes(out)


# ------------------------------------------------------------------ AES forward cipher (FIPS-197)
def _sbox() -> list[int]:
    box, p, q = [0] * 256, 1, 1
    box[0] = 0x63
    while True:
        p = p ^ ((p << 1) & 0xFF) ^ (0x1B if p & 0x80 else 0)      # p * 3 in GF(2^8)
        q ^= q << 1
        q ^= q << 2
        q ^= q << 4
        q &= 0xFF
        if q & 0x80:
            q ^= 0x09                                                 # q / 3
        x = q ^ ((q << 1) | (q >> 7)) ^ ((q << 2) | (q >> 6)) ^ ((q << 3) | (q >> 5)) ^ ((q << 4) | (q >> 4))
        box[p] = (x ^ 0x63) & 0xFF
        if p == 1:
            return box


_S = _sbox()


def _xt(b: int) -> int:
    return ((b << 1) ^ 0x1B) & 0xFF if b & 0x80 else b << 1


def _expand(key: bytes) -> list[list[int]]:
    nk = len(key) // 4
    if nk not in (4, 6, 8):
        raise DecryptError(f"an AES key is 16, 24 or 32 bytes, got {len(key)}")
    rounds = nk + 6
    w = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (rounds + 1)):
        t = list(w[i - 1])
        if i % nk == 0:
            t = [_S[t[1]] ^ rcon, _S[t[2]], _S[t[3]], _S[t[0]]]
            rcon = _xt(rcon)
        elif nk > 6 and i % nk == 4:
            t = [_S[b] for b in t]
        w.append([a ^ b for a, b in zip(w[i - nk], t)])
    return [sum(w[4 * r:4 * r + 4], []) for r in range(rounds + 1)]


def _encrypt_block(rk: list[list[int]], block: bytes) -> bytes:
    s = [b ^ k for b, k in zip(block, rk[0])]
    for r in range(1, len(rk)):
        s = [_S[b] for b in s]
        s = [s[(i + 4 * (i % 4)) % 16] for i in range(16)]            # ShiftRows (column-major state)
        if r != len(rk) - 1:
            m = []
            for c in range(4):
                a = s[4 * c:4 * c + 4]
                t = a[0] ^ a[1] ^ a[2] ^ a[3]
                m += [a[i] ^ t ^ _xt(a[i] ^ a[(i + 1) % 4]) for i in range(4)]
            s = m
        s = [b ^ k for b, k in zip(s, rk[r])]
    return bytes(s)
