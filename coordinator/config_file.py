"""Reading a config file's text: kept apart from ``coordinator.config`` so that ``shardctl``
reads task and source files without importing the parser (and sqlglot) at every start."""
from __future__ import annotations

from pathlib import Path

from coordinator.errors import ConfigError


def read_config(path: str, what: str = "config file") -> str:
    """The text of ``path``; a file that cannot be read or is not UTF-8 is a ConfigError naming it."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {what} {path}: {e.strerror}", file=path) from None
    return decode_config(data, path)


def decode_config(data: bytes, file: str) -> str:
    """``data`` as text; not UTF-8 is an error naming the line and column (YAML files are UTF-8,
    and a task's names reach MySQL as utf8mb4)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ConfigError(f"not valid UTF-8 at line {line}, column {col} (byte 0x{data[e.start]:02x}): save the "
                          "file as UTF-8", file=file) from None
