"""The shared local Spark session runs Python code in executors and offers the Python data
source API the worker's binlog source is built on."""


def test_spark_runs_python_tasks(spark):
    rdd = spark.sparkContext.parallelize(range(100), 4)
    assert rdd.mapPartitions(lambda it: [sum(it)]).sum() == sum(range(100))
    assert rdd.getNumPartitions() == 4


def test_python_data_source_api_available(spark):
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Numbers(DataSource):
        @classmethod
        def name(cls):
            return "sm_numbers"

        def schema(self):
            return "n int"

        def reader(self, schema):
            return _Reader()

    class _Reader(DataSourceReader):
        def read(self, partition):
            for i in range(5):
                yield (i,)

    spark.dataSource.register(Numbers)
    assert [r.n for r in spark.read.format("sm_numbers").load().collect()] == [0, 1, 2, 3, 4]
