"""Passwords sealed before they are stored in etcd, with the operator's key (DM's
``secret-key-path`` habit): whoever can read etcd reads ciphertext.

With ``SHARDMERGE_DM_SECRET_KEY_PATH`` set (64 hex characters, an AES-256 key; the same file the
workers are given), a source's ``from.password`` and a task's ``target-database.password`` are
replaced in the stored YAML by their ``dmctl encrypt`` form, which every reader of the record
decrypts with that key (``coordinator.dm_encrypt``).  Without a key they are stored as given, and
the master says so when it starts.  ``password-file`` / ``password-env`` never put a secret in
etcd at all.
"""
from __future__ import annotations

import os

import yaml

from coordinator import dm_encrypt

SOURCE = ("from", "password")
TASK = ("target-database", "password")


def enabled() -> bool:
    return bool(os.environ.get(dm_encrypt.KEY_ENV))


def seal(text: str, path: tuple[str, str]) -> str:
    """``text`` (a validated source or task YAML) with the password at ``path`` encrypted, when a
    key is configured and the password is plain; else ``text`` unchanged."""
    if not enabled():
        return text
    doc = yaml.safe_load(text)
    section = doc.get(path[0]) if isinstance(doc, dict) else None
    if not isinstance(section, dict):
        return text
    value = section.get(path[1])
    if value in (None, "") or isinstance(value, bool):
        return text
    value = str(value)
    if dm_encrypt.looks_encrypted(value):
        return text                    # sealed already (or given as `dmctl encrypt` wrote it)
    section[path[1]] = dm_encrypt.encrypt(value)
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


UNSEALED_WARNING = (f"passwords given in source and task files are stored in etcd as given (plain text): set "
                    f"{dm_encrypt.KEY_ENV} to a file of 64 hex characters (an AES-256 key; the workers need the "
                    "same) to store them encrypted, or use password-file / password-env")
