"""Soak run: the chaos harness for a long time at a steady load, watching memory and lag.

    .venv/bin/python -m tests.chaos.soak --minutes 30     # the documented run (docs/reliability.md)
    .venv/bin/python -m tests.chaos.soak --minutes 1.5 --fault-every 40   # CI form (test_soak_short.py)

* Load: the chaos writers plus one bulk writer per source, together about 1,000-1,200 row
  changes/s (20-row INSERTs at 280 rows/s per source, and DELETEs of as many of the oldest bulk
  rows once 20,000 are live, so the tables stay bounded).
* A shard DDL every ~30 s (the chaos DDL rounds: add, index, rename, modify, generated column,
  drop, one statement on one shard at a time).
* A fault every 90 s: etcd or downstream restarts.  Process kills are left to the chaos run: a
  killed process starts with a fresh heap, which would hide the memory growth this run watches.
* Every 10 s: the RSS of each worker's and master's process tree (Python, JVM, decoder, Spark's
  Python workers) and the replication lag (``query-status`` ``secondsBehindMaster``).

Prints the chaos summary line, then ``SOAK ...`` with the RSS after the warm-up (5 minutes, or 40%
of a shorter run) and at the end, its growth, and the lag p50/p99 after the warm-up.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from tests.support.proctree import group_rss
from tests.support.writer import BackgroundWriter

from .run import Harness, summary_line
from .workload import ID_BASE, SHARDS, connect

BULK_BASE = 500_000_000          # bulk ids: far above the chaos writers' ids of the same source
BULK_ROWS, BULK_LIVE = 20, 20_000


class BulkWriter(BackgroundWriter):
    """20-row INSERTs at ``rate`` rows/s on one source's shards; the oldest rows are deleted once
    more than BULK_LIVE are live, so the tables stay bounded."""

    def __init__(self, sid: str, params: dict, db: str, rate: float, seed: int):
        super().__init__(f"bulk-{sid}", lambda: connect(params, db), seed)
        self.rate = rate
        self.next_id = ID_BASE[sid] + BULK_BASE
        self.live: list[tuple[str, int, int]] = []      # (table, first id, last id) per insert
        self.rows_written = 0
        self._next_at = 0.0

    def pause(self) -> float:
        """Paced: one insert every BULK_ROWS / rate seconds, however long the inserts take."""
        now = time.monotonic()
        self._next_at = self._next_at + BULK_ROWS / self.rate if self._next_at else now
        return max(0.0, self._next_at - now)

    def step(self, conn) -> None:
        t = self.rng.choice(SHARDS)
        first = self.next_id + 1
        ids = range(first, first + BULK_ROWS)
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {t} (id, v, note) VALUES (%s, %s, %s)",
                            [(i, i % 97, "bulk") for i in ids])
        self.next_id += BULK_ROWS
        self.live.append((t, first, first + BULK_ROWS - 1))
        self.rows_written += BULK_ROWS
        if len(self.live) * BULK_ROWS > BULK_LIVE:
            ot, lo, hi = self.live.pop(0)
            with conn.cursor() as cur:
                cur.execute(f"DELETE FROM {ot} WHERE id BETWEEN %s AND %s", (lo, hi))
            self.rows_written += hi - lo + 1


class Soak(Harness):
    def __init__(self, minutes: float, seed: int, fault_every: float = 90.0, **kw):
        duration = minutes * 60
        super().__init__(seed, max(1, int(duration // fault_every)), duration, **kw)
        self.minutes, self.fault_every = minutes, fault_every
        self.warmup = min(300.0, 0.4 * duration)
        self.samples: list[dict] = []
        self.sampler = threading.Thread(target=self._sample, name="soak-sampler", daemon=True)
        self.sampling = threading.Event()

    def schedule(self) -> list[tuple[float, str]]:
        """A fault every ``fault_every`` s (90 by default), alternating etcd / downstream restarts."""
        kinds = ("etcd_restart", "downstream_restart")
        every = self.fault_every
        return [(every * (i + 1), kinds[i % 2]) for i in range(self.n_faults) if every * (i + 1) < self.duration]

    def setup(self) -> None:
        super().setup()
        self.ddl.gap = (28.0, 32.0)
        self.bulk = [BulkWriter(sid, self.mysql[server], self.db, rate=280.0, seed=self.seed * 100 + n)
                     for n, (sid, server) in enumerate((("s1", "source1"), ("s2", "source2")))]
        for b in self.bulk:
            b.start()
        self.t_load = time.monotonic()
        self.sampler.start()

    def _sample(self) -> None:
        while not self.sampling.wait(10):
            at = time.monotonic() - self.t_load
            rss = {p.name: round(group_rss(p.proc.pid) / 2**20, 1) for p in self.cluster.procs() if p.alive()}
            lag = {}
            try:
                for sid, st in self.subtasks().items():
                    lag[sid] = float(st.get("sync", {}).get("secondsBehindMaster") or 0.0)
            except Exception:  # noqa: BLE001 — a sample lost during a fault
                pass
            self.samples.append({"t": round(at, 1), "rss": rss, "lag": lag})

    def stop_extra_load(self) -> None:
        for b in getattr(self, "bulk", ()):
            b.stop()
        self.sampling.set()

    def figures(self) -> dict:
        def rss_at(t: float, who: str) -> float:
            s = min(self.samples, key=lambda x: abs(x["t"] - t)) if self.samples else {"rss": {}}
            return round(sum(v for k, v in s["rss"].items() if k.startswith(who)), 1)
        end = self.samples[-1]["t"] if self.samples else 0.0
        lags = sorted(v for s in self.samples if s["t"] >= self.warmup for v in s["lag"].values())

        def pct(p: float) -> float:
            return round(lags[min(len(lags) - 1, int(p * len(lags)))], 1) if lags else -1.0
        out = {"minutes": self.minutes, "warmup_s": self.warmup,
               "bulk_rows_written": sum(b.rows_written for b in self.bulk),
               "rows_per_s": 0.0, "lag_p50_s": pct(0.5), "lag_p99_s": pct(0.99), "samples": len(self.samples)}
        for who in ("worker", "m"):
            a, b = rss_at(self.warmup, who), rss_at(end, who)
            name = "workers" if who == "worker" else "masters"
            out[f"rss_{name}_mb_warm"] = a
            out[f"rss_{name}_mb_end"] = b
            out[f"rss_{name}_growth_pct"] = round(100.0 * (b - a) / a, 1) if a else -1.0
        return out


def soak_line(r: dict, f: dict) -> str:
    return (f"SOAK minutes={f['minutes']} rows_written={r['rows_written'] + f['bulk_rows_written']} "
            f"({f['rows_per_s']:.0f}/s) faults={r['faults']} rows_lost={r['rows_lost']} "
            f"rows_duplicated={r['rows_duplicated']} rows_stale={r['rows_stale']} check={r['check']} "
            f"rss_workers_mb={f['rss_workers_mb_warm']}->{f['rss_workers_mb_end']} "
            f"({f['rss_workers_growth_pct']:+.1f}%) rss_masters_mb={f['rss_masters_mb_warm']}->"
            f"{f['rss_masters_mb_end']} ({f['rss_masters_growth_pct']:+.1f}%) "
            f"lag_p50={f['lag_p50_s']}s lag_p99={f['lag_p99_s']}s warmup={f['warmup_s']:.0f}s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.chaos.soak", description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fault-every", type=float, default=90.0, help="seconds between faults (default 90)")
    ap.add_argument("--json-out", default="")
    ap.add_argument("--work-dir", default="")
    ap.add_argument("--stop-services", action="store_true")
    a = ap.parse_args(argv)
    s = Soak(a.minutes, a.seed, a.fault_every, catchup_timeout=300, work=Path(a.work_dir) if a.work_dir else None)
    try:
        r = s.run()
        f = s.figures()
        f["rows_per_s"] = (r["rows_written"] + f["bulk_rows_written"]) / max(1.0, a.minutes * 60)
        print(summary_line(r), flush=True)
        print(soak_line(r, f), flush=True)
        if a.json_out:
            Path(a.json_out).write_text(json.dumps({"chaos": r, "soak": f, "samples": s.samples}, indent=2,
                                                   default=str))
        ok = (r["caught_up"] and r["rows_lost"] == 0 and r["rows_stale"] == 0 and r["rows_duplicated"] == 0
              and r["check"] == "equal" and not r["fault_errors"] and r["unexpected_exits"] == 0)
        return 0 if ok else 1
    finally:
        s.stop_extra_load()
        s.cleanup()
        if a.stop_services:
            from . import services
            services.stop()


if __name__ == "__main__":
    sys.exit(main())
