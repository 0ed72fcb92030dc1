"""The gRPC server's guard: every call is identified and authorized by the ``AccessPolicy``
before the service sees it, so a refused call changes nothing.  Refusals are UNAUTHENTICATED
(no or an unknown credential) or PERMISSION_DENIED (CN not allowed, read-only caller) with the
policy's sentence as details."""
from __future__ import annotations

import grpc

from coordinator.obs import logger

from .policy import AccessDenied, AccessPolicy, bearer, rpc_role

_CODES = {401: grpc.StatusCode.UNAUTHENTICATED, 403: grpc.StatusCode.PERMISSION_DENIED}


def peer_cn(context) -> str | None:
    """CN of the verified client certificate of this call (None: plain text or no certificate)."""
    auth = context.auth_context() or {}
    cns = auth.get("x509_common_name") or []
    return cns[0].decode() if cns else None


def _token(context) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == "authorization":
            return bearer(v if isinstance(v, str) else v.decode())
    return None


class AccessGuard(grpc.ServerInterceptor):
    def __init__(self, policy: AccessPolicy, member: str = ""):
        self.policy = policy
        self.log = logger("master.access", member=member)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or self.policy.open:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary

        def guarded(request, context):
            try:
                caller = self.policy.identify(peer_cn(context), _token(context))
                self.policy.authorize(caller, rpc_role(method, request), method)
            except AccessDenied as e:
                self.log.warning("call refused", rpc=method, peer=context.peer(), code=e.status, error=str(e))
                context.abort(_CODES[e.status], str(e))
            return inner(request, context)

        return grpc.unary_unary_rpc_method_handler(guarded, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
