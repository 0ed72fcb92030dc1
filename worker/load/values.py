"""Key values as JSON text: the full load stores its chunk bounds this way (``worker/load/store.py``),
and reads them back exactly, types JSON lacks included."""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import json


def enc(v):
    """A value as JSON: types JSON lacks are tagged so a reader gets them back exactly."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, decimal.Decimal):
        return {"$n": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return {"$s": v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v.isoformat()}
    if isinstance(v, dt.timedelta):
        total = int(v.total_seconds())
        sign, total = ("-" if total < 0 else ""), abs(total)
        micro = abs(v.microseconds) if v.days >= 0 else (1_000_000 - v.microseconds) % 1_000_000
        s = f"{sign}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"
        return {"$s": s + (f".{micro:06d}" if micro else "")}
    if isinstance(v, (set, frozenset)):
        return {"$s": ",".join(sorted(v))}
    if isinstance(v, (dict, list)):
        return {"$s": json.dumps(v, ensure_ascii=False, default=str)}
    return {"$s": str(v)}


def dec(v):
    """Inverse of :func:`enc` into values pymysql can bind."""
    if isinstance(v, dict):
        if "$b" in v:
            return base64.b64decode(v["$b"])
        if "$n" in v:
            return decimal.Decimal(v["$n"])
        if "$s" in v:
            return v["$s"]
    return v
