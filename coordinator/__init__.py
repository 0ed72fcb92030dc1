"""shardmerge coordinator: schema lattice, optimistic lock engine, etcd protocol, master and CLI."""
__version__ = "0.1.0"
