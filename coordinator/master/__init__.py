"""The master process: leader election with fencing, the gRPC API, source bindings and the glue
between etcd and the lock engine (see docs/master.md).  Entry point: ``shardctl master``."""
