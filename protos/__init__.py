"""Generated gRPC stubs of the master API (regenerate with scripts/gen-protos)."""
