"""``shardctl encrypt PASSWORD`` / ``shardctl decrypt CIPHERTEXT``: dmctl's commands, run locally
(no master).  The ciphertext goes into a source or task file's ``password`` as with DM; the key is
DM's (``coordinator.dm_encrypt``: ``$SHARDMERGE_DM_SECRET_KEY_PATH``, else DM's key before v8.0)."""
from __future__ import annotations

import sys

from coordinator import dm_encrypt

from .common import CLIError


def encrypt(args) -> int:
    try:
        sys.stdout.write(dm_encrypt.encrypt(args.text) + "\n")
    except dm_encrypt.DecryptError as e:
        raise CLIError(str(e)) from None
    return 0


def decrypt(args) -> int:
    if not dm_encrypt.looks_encrypted(args.text):
        raise CLIError("not a dmctl-encrypted value (base64 of a 16-byte IV, '@', the ciphertext)")
    try:
        sys.stdout.write(dm_encrypt.decrypt(args.text) + "\n")
    except dm_encrypt.DecryptError as e:
        raise CLIError(str(e)) from None
    return 0


def register(sub) -> None:
    p = sub.add_parser("encrypt", help="encrypt a password for a source or task file, as dmctl encrypt does "
                                       "(local: no master)")
    p.add_argument("text", metavar="PASSWORD", help="the plain password")
    p.set_defaults(func=encrypt)
    p = sub.add_parser("decrypt", help="decrypt a dmctl-encrypted password, as dmctl decrypt does (local)")
    p.add_argument("text", metavar="CIPHERTEXT", help="the value of an encrypted password")
    p.set_defaults(func=decrypt)
