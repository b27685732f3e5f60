"""VocabdError: every failed call, carrying the gRPC status code and message."""
import re

import grpc

# What a plaintext channel sees when the server speaks TLS (and vice versa).
_TLS_MISMATCH_HINTS = ("Socket closed", "Connection reset", "WRONG_VERSION_NUMBER",
                       "Handshake", "handshake")


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
      hint: a suggestion when the failure looks like a TLS/plaintext mismatch.
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


def from_rpc_error(err, tls):
    """grpc.RpcError -> VocabdError (with a TLS hint where it fits)."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    hint = None
    if code == grpc.StatusCode.UNAVAILABLE and "not in peer certificate" in (message or ""):
        hint = ("the server certificate does not name the target host: pass "
                "Tls(server_name=NAME) with a name in its subjectAltName")
    elif code == grpc.StatusCode.UNAVAILABLE and any(h in (message or "") for h in _TLS_MISMATCH_HINTS):
        hint = ("the server may speak TLS: pass tls=True (and ca=..., server_name=...)"
                if not tls else
                "the server may be plaintext, or its certificate does not match: check tls=, "
                "ca= and server_name=")
    return VocabdError(code, message, hint)
