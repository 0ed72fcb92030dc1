"""shardmerge worker: Spark binlog replication with shard merge and downstream checkpoints."""
