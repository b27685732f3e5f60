"""VocabdError: every failed call, carrying the gRPC status code and message."""
import re

import grpc

# What a client sees when the server ends the connection during the TLS
# handshake.
_CLOSED = ("Socket closed", "Connection reset", "connection reset")


# A field path as the server's messages write it: snake_case names with
# [i] / [i, j] indexes, joined by dots, then ": ", " = ", " has ", " is ".
_NAME = r"[a-z_][a-z0-9_]*(?:\[\d+(?:, \d+)*\])?"
_FIELD = re.compile(rf"({_NAME}(?:\.{_NAME})*)(?=: | = | has | is )")


class VocabdError(Exception):
    """A vocabd call failed.

    Attributes:
      code: grpc.StatusCode (e.g. grpc.StatusCode.INVALID_ARGUMENT).
      message: the server's status message (names the field and value), or
        the transport's reason for UNAVAILABLE / DEADLINE_EXCEEDED.
      request_index: for streams, the index of the request the server named
        ("requests[i]: ..."), else None.
      field: the request field the server's message starts with, e.g.
        "texts[1]" for "texts[1]: invalid UTF-8 at byte offset 2",
        "sequences[0].ids[1]" for "sequences[0].ids[1] = 512 is outside
        [0, 512)", "candidate_ids" for "candidate_ids has 4097 entries; ...";
        None when the message does not start with one.
      hint: a suggestion when the failure looks like a TLS mismatch
        (plaintext vs TLS, the server certificate's CA or name, a client
        certificate an mTLS server requires), naming the Tls field to set.
    """

    def __init__(self, code, message, hint=None):
        self.code = code
        self.message = message
        self.hint = hint
        m = re.match(r"requests\[(\d+)\]: ", message or "")
        self.request_index = int(m.group(1)) if m else None
        f = _FIELD.match(message or "", m.end() if m else 0)
        self.field = f.group(1) if f else None
        text = f"{code.name}: {message}"
        if hint:
            text += f" (hint: {hint})"
        super().__init__(text)

    @property
    def code_name(self):
        """The status code's name, e.g. "INVALID_ARGUMENT"."""
        return self.code.name


def connection_hint(code, message, tls):
    """A hint for a failed call that looks like a TLS mismatch, else None.

    tls: the client's TLS settings (a vocabd.Tls, or None for plaintext).
    What grpc's TLS client reports, and what each means:
      "Peer name X is not in peer certificate": the certificate does not
        name X (the target host, or Tls.server_name);
      "certificate verify failed": the server certificate is not signed by
        Tls.ca (or a system root);
      "wrong version number": the server is plaintext;
      "Socket closed": the server ended the connection -- it speaks TLS to a
        plaintext client, or it is an mTLS server that got no client
        certificate it accepts.
    """
    m = message or ""
    if code != grpc.StatusCode.UNAVAILABLE:
        return None
    server_name = getattr(tls, "server_name", None)
    if "not in peer certificate" in m:
        if server_name:
            return (f"the server certificate does not name {server_name!r} "
                    "(Tls(server_name=...)): use a name in its subjectAltName")
        return ("the server certificate does not name the target host: pass "
                "Tls(server_name=NAME) with a name in its subjectAltName")
    closed = any(h in m for h in _CLOSED)
    if tls is None:
        if closed or "handshake" in m.lower():
            return ("the server may speak TLS: pass tls=True, or tls=Tls(ca=..., "
                    "server_name=...)")
        return None
    if "wrong version number" in m.lower():
        return "the server speaks plaintext: drop tls= (and token=)"
    if "certificate verify failed" in m.lower():
        if getattr(tls, "ca", None) is None:
            return ("the server certificate is not signed by a system root CA: pass "
                    "tls=Tls(ca=...) with the CA that signed it")
        return "the server certificate is not signed by the CA in Tls(ca=...)"
    if closed:
        if getattr(tls, "cert", None) is None:
            return ("the server closed the TLS handshake: it may require a client "
                    "certificate (mutual TLS: Tls(cert=..., key=...))")
        return ("the server closed the TLS handshake: it did not accept the client "
                "certificate in Tls(cert=...) (not signed by the CA it trusts, vocabd "
                "--tls-client-ca)")
    if "handshake" in m.lower():
        return ("TLS handshake failed: check Tls(ca=..., cert=..., key=..., server_name=...) "
                "against the server's certificates")
    return None


def from_rpc_error(err, tls):
    """grpc.RpcError -> VocabdError (with a TLS hint where it fits).
    tls: the client's vocabd.Tls settings, or None for plaintext."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    return VocabdError(code, message, connection_hint(code, message, tls))
