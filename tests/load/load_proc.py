"""Runs one source's full load in its own process (own Spark driver), so a test can SIGKILL
it midway like a crashed worker.  Usage: load_proc.py TASK_YAML SOURCE_YAML SECONDS_PER_CHUNK"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main() -> None:
    from worker.spark_session import builder

    from coordinator.config import parse_source, parse_task
    from coordinator.obs import setup_logging
    from worker.load import LoadHooks, run_full_load
    setup_logging("INFO", sys.stdout)
    task = parse_task(open(sys.argv[1]).read(), sys.argv[1])
    source = parse_source(open(sys.argv[2]).read(), sys.argv[2])
    pause = float(sys.argv[3])
    spark = builder("load-proc", "local[2]", spark__driver__memory="512m").getOrCreate()
    run_full_load(task, source, spark, hooks=LoadHooks(after_chunk=lambda r: time.sleep(pause)),
                  progress_interval=0.5)
    print("LOAD-FINISHED", flush=True)


if __name__ == "__main__":
    main()
