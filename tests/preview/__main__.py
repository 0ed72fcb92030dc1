"""``python -m tests.preview --sequences N [--start S] [--tables T] [--plans P]``: the differential
test of ddl-preview (tests/preview/differential.py) on a real cluster it starts on the dev
services (``SHARDMERGE_SERVICES_PORT_OFFSET`` respected); prints each mismatch with its steps and a
summary line; exit 1 if any sequence mismatched or failed."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from coordinator.etcd_client import connect
from tests.conftest import Services, devservices
from tests.e2e.conftest import Cluster
from tests.support.cluster import running

from .differential import Differential, make_sequence


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.preview", description=__doc__)
    p.add_argument("--sequences", type=int, default=200)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--tables", type=int, default=3)
    p.add_argument("--plans", type=int, default=2)
    p.add_argument("--stop-after", type=int, default=5, help="stop after this many failed sequences")
    a = p.parse_args(argv)
    info = devservices.start()
    services = Services(etcd=info["etcd"], mysql=info["mysql"])
    etcd = connect(services.etcd)
    kinds: Counter = Counter()
    steps = bad = statements = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="preview-diff-") as tmp, \
            running(lambda prefix, work: Cluster(services, prefix, work), etcd, "preview-diff", Path(tmp)) as c:
        d = Differential(c, services, Path(tmp))
        try:
            for seed in range(a.start, a.start + a.sequences):
                out = d.run(make_sequence(seed, a.tables, a.plans))
                kinds[out.ended] += 1
                steps += out.steps
                statements += out.statements
                print(f"seed {seed}: {out.ended} after {out.steps} steps, {out.statements} downstream statements "
                      f"({out.seconds:.1f}s) {out.detail[:300]}",
                      flush=True)
                if not out.ok:
                    bad += 1
                    print("  " + "\n  ".join(out.log), flush=True)
                    if bad >= a.stop_after:
                        break
        finally:
            d.close()
    print(f"{sum(kinds.values())} sequences, {steps} steps and {statements} downstream statements compared, "
          f"{dict(kinds)}, {bad} failed, "
          f"{time.monotonic() - t0:.0f}s")
    etcd.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
