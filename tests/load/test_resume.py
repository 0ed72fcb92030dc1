"""A full load killed with SIGKILL midway (a real separate process with its own Spark driver)
resumes without reloading finished chunks and without duplicates; then the syncer continues
and ``check_task`` finds the merge equal."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.load.conftest import create_shards, make_load_task
from worker.check import check_task
from worker.load import run_full_load
from worker.load.store import LoadStore
from worker.sync.syncer import Syncer

HERE = Path(__file__).resolve().parent


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def _done_chunks(store: LoadStore) -> tuple[int, int]:
    st = store.load()
    return sum(1 for c in st.chunks if c.status == "done"), len(st.chunks)


def test_sigkilled_load_resumes_without_reloading(spark, source1_db, downstream_db, tmp_path):
    create_shards(source1_db, 3_000_000, n=3, rows=100)
    task, srcs, text = make_load_task(downstream_db, {"s1": source1_db}, rows_per_chunk=20, pool_size=2)
    (tmp_path / "task.yaml").write_text(text)
    p = source1_db.params
    (tmp_path / "source.yaml").write_text(yaml.safe_dump({"source-id": "s1", "from": {
        "host": p["host"], "port": p["port"], "user": p["user"], "password": p["password"]}}))
    store = LoadStore(task.target.pymysql_kwargs(), task.meta_schema, task.name, "s1")
    log_path = tmp_path / "proc.log"
    with open(log_path, "w") as out:
        proc = subprocess.Popen([sys.executable, str(HERE / "load_proc.py"), str(tmp_path / "task.yaml"),
                                 str(tmp_path / "source.yaml"), "0.4"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        try:
            deadline = time.monotonic() + 120
            done = total = 0
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    done, total = _done_chunks(store)
                except Exception:       # plan table not there yet
                    pass
                if done >= 3:
                    break
                time.sleep(0.1)
            assert proc.poll() is None, log_path.read_text()[-3000:]
            os.killpg(proc.pid, signal.SIGKILL)     # the whole process group: Python, JVM, Spark workers
            proc.wait(30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    # killed mid-chunk transactions roll back on the server when their sockets close
    time.sleep(1.0)
    done, total = _done_chunks(store)
    assert 3 <= done < total, (done, total)
    assert "LOAD-FINISHED" not in log_path.read_text()
    # atomicity: exactly the rows of the chunks marked done are in the target
    rows_done = sum(c.rows for c in store.load().chunks if c.status == "done")
    assert downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == rows_done

    source1_db.execute("UPDATE orders_01 SET qty = -1 WHERE id % 3 = 0")   # changes after the kill
    source1_db.execute("DELETE FROM orders_02 WHERE id % 4 = 0")
    cap = _Capture()
    lg = logging.getLogger("shardmerge.worker.load")
    lg.addHandler(cap)
    level = lg.level
    lg.setLevel(logging.INFO)
    try:
        r = run_full_load(task, srcs["s1"], spark)
    finally:
        lg.removeHandler(cap)
        lg.setLevel(level)
    assert r.chunks_skipped == done and r.chunks_loaded == total - done
    msgs = [rec.getMessage() for rec in cap.records]
    assert f"full load resumed: {done} of {total} chunks already loaded, not reloading them" in msgs
    Syncer(spark, task, srcs["s1"]).sync_until_caught_up()
    rep = check_task(task, srcs)
    assert rep.equal, rep.to_json()
