"""shardmerge coordinator: schema lattice, optimistic lock engine, etcd protocol, master and CLI."""
import os

__version__ = "0.1.0"

# gRPC's fork handlers run in every child forked while gRPC threads are busy, and can hang it
# before it execs: seen as a worker stuck at Spark start (PySpark forks its JVM launcher with a
# preexec_fn) with the child waiting in gRPC's post-fork handler.  No child of ours uses gRPC (every
# one execs a new program), so the handlers are turned off before gRPC is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
