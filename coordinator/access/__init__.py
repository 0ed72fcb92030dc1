"""Who may use the master's control plane (gRPC and HTTP): TLS material (``tls``), roles, tokens
and the decision for one call (``policy``), and the gRPC server's guard (``grpc_guard``)."""
