"""The master's HTTP API (OpenAPI 3, DM's ``/api/v1`` paths) and its web page.

The HTTP layer is a thin translation onto the master's own gRPC service (``app.ApiApp`` calls
the local gRPC endpoint), so a follower forwards writes exactly as it does for ``shardctl`` and
the API and the CLI cannot answer differently.  Spec: ``openapi.json`` beside this file; docs:
``docs/http-api.md``.
"""
