"""A separate driver process runs Python tasks on the real standalone cluster, as a worker
deployed with --spark-master spark://... does (not local[*])."""
import json
import subprocess
import sys
import textwrap

DRIVER = textwrap.dedent("""
    import json, socket, sys
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master(sys.argv[1]).appName("sm-cluster-probe")
         .config("spark.ui.enabled", "false").config("spark.executor.memory", "512m")
         .config("spark.cores.max", "2").getOrCreate())
    rdd = s.sparkContext.parallelize(range(1000), 4)
    total = rdd.sum()
    execs = s.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    print(json.dumps({"master": s.sparkContext.master, "total": total, "executors": execs}))
    s.stop()
""")


def test_driver_runs_tasks_on_standalone_cluster(spark_cluster, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    r = subprocess.run([sys.executable, str(script), spark_cluster], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["master"] == spark_cluster and out["total"] == sum(range(1000))
    assert out["executors"] >= 2  # the driver's block manager plus at least one cluster executor
