"""VocabdClient: a small typed wrapper over the generated vocabd.v1 stubs.

Every method raises VocabdError (vocabd/errors.py) on a failed call, with the
gRPC status code and the server's message.
"""
import json
import numbers
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from vocabd import _tensor
from vocabd.errors import VocabdError, from_rpc_error
from vocabd.v1 import (embedding_pb2, embedding_pb2_grpc, model_pb2, model_pb2_grpc,
                       position_pb2, position_pb2_grpc, rope_pb2, scoring_pb2,
                       scoring_pb2_grpc, tokenizer_pb2, tokenizer_pb2_grpc)


# The gRPC service config every VocabdClient channel uses by default: the
# same policy as vocabctl (client/vocabd_client.h kDefaultServiceConfig).
# gRPC re-sends a call that failed with UNAVAILABLE (server unreachable,
# connection refused, draining, or gone with the call in flight) or that the
# server ended CANCELLED (a draining server's transport cancels the calls it
# had received but not started; a call the client cancelled or whose
# deadline passed is never re-sent) up to maxAttempts times in all, after a
# randomized exponential backoff (50 ms x 2^n, at most 1 s), on another
# address when the channel has several (lb_policy="round_robin"). Retried: every RPC without effects beyond its
# answer (EmbeddingService, ScoringService, PositionService,
# TokenizerService, grpc.health.v1.Health, ModelService ListModels and
# GetModel); streams only until their first response. Never retried:
# ModelService LoadModel and UnloadModel (they change one replica's state).
# A request over gRPC's 256 KiB retry buffer is sent once.
_RETRIED_METHODS = [
    {"service": "vocabd.v1.EmbeddingService"},
    {"service": "vocabd.v1.ScoringService"},
    {"service": "vocabd.v1.PositionService"},
    {"service": "vocabd.v1.TokenizerService"},
    {"service": "grpc.health.v1.Health"},
    {"service": "vocabd.v1.ModelService", "method": "ListModels"},
    {"service": "vocabd.v1.ModelService", "method": "GetModel"},
]
DEFAULT_SERVICE_CONFIG = json.dumps({
    "methodConfig": [{
        "name": _RETRIED_METHODS,
        "retryPolicy": {
            "maxAttempts": 5,
            "initialBackoff": "0.05s",
            "maxBackoff": "1s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"],
        },
    }],
})


@dataclass
class TopToken:
    """A token and its natural-log probability (scoring.proto TokenLogprob).
    piece / token_bytes: with score(return_pieces=True), the vocabulary entry
    as stored (b"\xe2\x96\x81Once", i.e. "▁Once") and the bytes it adds to
    decoded text (b" Once"; may be part of a UTF-8 character); else None."""
    token_id: int
    logprob: float
    piece: Optional[bytes] = None
    token_bytes: Optional[bytes] = None


@dataclass
class RowScore:
    """One hidden row's scores (scoring.proto RowScore).
    candidates: one TopToken per score(candidate_ids=...) entry, in that order.
    target_piece / target_token_bytes: with return_pieces and targets."""
    target_logprob: float
    target_rank: int
    logsumexp: float
    top_k: List[TopToken]
    candidates: List[TopToken] = field(default_factory=list)
    target_piece: Optional[bytes] = None
    target_token_bytes: Optional[bytes] = None


@dataclass
class ScoreResult:
    rows: List[RowScore]
    sum_target_logprob: float
    num_targets: int
    model: str
    request_id: str = ""


@dataclass
class TokenizerInfo:
    """The model's own tokenizer (model.proto TokenizerInfo)."""
    kind: str                    # "sentencepiece", "bpe", "wordpiece", ...
    source: str                  # where it was loaded from
    vocab_size: int
    bos_token_id: Optional[int]  # None = the tokenizer has none
    eos_token_id: Optional[int]


@dataclass
class Model:
    """A model the server knows (model.proto ModelInfo); `info` is the full message.
    tokenizer: None when the model carries none; tokenizer_missing_reason
    then says what the server looked for."""
    name: str
    state: str          # "READY", "LOADING", "FAILED", "UNLOADING", "AVAILABLE"
    state_reason: str
    architecture: str
    vocab_size: int
    hidden_size: int
    dtype: str
    is_default: bool
    info: model_pb2.ModelInfo = field(repr=False)
    tokenizer: Optional[TokenizerInfo] = None
    tokenizer_missing_reason: str = ""


@dataclass
class Tokenized:
    """One text's tokens (tokenizer.proto TokenizedText), from
    tokenize(..., return_pieces=True and/or return_offsets=True).
    pieces: per id, the vocabulary entry as stored (b"\xe2\x96\x81Once").
    token_bytes: per id, the bytes it adds to decoded text (b" Once"; a byte
    token gives one byte of a UTF-8 character). offsets: per id, the
    [begin, end) byte span of the UTF-8 input it came from (special tokens
    added by add_special_tokens: an empty span at 0 or at the end).
    Fields not asked for are None."""
    ids: List[int]
    pieces: Optional[List[bytes]] = None
    token_bytes: Optional[List[bytes]] = None
    offsets: Optional[List[Tuple[int, int]]] = None


@dataclass
class IncrementalText:
    """detokenize_incremental's result (tokenizer.proto DetokenizedText):
    text is the well-formed text the new ids complete; held_back_bytes (0..3)
    counts the bytes of an incomplete UTF-8 character at the end that a
    later call returns once its remaining bytes arrive."""
    text: str
    held_back_bytes: int


@dataclass
class VocabEntry:
    """One vocabulary entry (tokenizer.proto VocabularyEntry).
    type: "NORMAL", "UNKNOWN", "CONTROL", "USER_DEFINED", "UNUSED", "BYTE"
    (or "UNSPECIFIED"); score: SentencePiece / GGUF score, 0 if none."""
    id: int
    piece: bytes
    token_bytes: bytes
    type: str
    score: float


@dataclass
class VocabularyPage:
    """entries: ids start_id .. start_id + len(entries) - 1; next_start_id
    equals vocab_size after the last page."""
    entries: List[VocabEntry]
    vocab_size: int
    next_start_id: int
    model: str


@dataclass
class Tls:
    """TLS settings. ca: PEM CA bundle (bytes or a file path; None = system
    roots). cert/key: client certificate and key for mutual TLS. server_name:
    the name to check the server certificate against (needed when the target
    is an IP address the certificate has no IP SAN for)."""
    ca: Optional[object] = None
    cert: Optional[object] = None
    key: Optional[object] = None
    server_name: Optional[str] = None


def _pem(value):
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


_LAYOUTS = {"bhsd": position_pb2.BHSD, "bshd": position_pb2.BSHD, "thd": position_pb2.THD}
_ABSOLUTE = {None: embedding_pb2.ABSOLUTE_POSITIONS_MODEL_DEFAULT,
             "none": embedding_pb2.ABSOLUTE_POSITIONS_NONE,
             "sinusoidal": embedding_pb2.ABSOLUTE_POSITIONS_SINUSOIDAL,
             "learned": embedding_pb2.ABSOLUTE_POSITIONS_LEARNED}


def _choice(table, value, what):
    try:
        return table[value.lower() if isinstance(value, str) else value]
    except KeyError:
        names = ", ".join(repr(k) for k in table)
        raise ValueError(f"{what} {value!r} is not one of {names}") from None


def _float_tensor(hidden):
    """hidden states as F16 (float16 arrays) or F32 (anything else)."""
    a = np.asarray(hidden)
    return _tensor.encode(a if a.dtype == np.float16 else a.astype(np.float32, copy=False))


def _token(t, pieces):
    if pieces:
        return TopToken(t.token_id, t.logprob, bytes(t.piece), bytes(t.token_bytes))
    return TopToken(t.token_id, t.logprob)


def _row_score(r, pieces=False, has_targets=False):
    with_target = pieces and has_targets
    return RowScore(target_logprob=r.target_logprob, target_rank=r.target_rank,
                    logsumexp=r.logsumexp,
                    top_k=[_token(t, pieces) for t in r.top_k],
                    candidates=[_token(t, pieces) for t in r.candidates],
                    target_piece=bytes(r.target_piece) if with_target else None,
                    target_token_bytes=bytes(r.target_token_bytes) if with_target else None)


def _score_result(resp, pieces=False, has_targets=False):
    return ScoreResult(rows=[_row_score(r, pieces, has_targets) for r in resp.rows],
                       sum_target_logprob=resp.sum_target_logprob,
                       num_targets=resp.num_targets, model=resp.model,
                       request_id=resp.request_id)


def _optional_id(v):
    return None if v < 0 else int(v)


def _model(info):
    tok = None
    if info.HasField("tokenizer"):
        t = info.tokenizer
        tok = TokenizerInfo(kind=t.kind, source=t.source, vocab_size=t.vocab_size,
                            bos_token_id=_optional_id(t.bos_token_id),
                            eos_token_id=_optional_id(t.eos_token_id))
    return Model(name=info.name, state=model_pb2.ModelState.Name(info.state),
                 state_reason=info.state_reason, architecture=info.architecture,
                 vocab_size=info.vocab_size, hidden_size=info.hidden_size,
                 dtype=_tensor.tensor_pb2.DType.Name(info.dtype), is_default=info.is_default,
                 info=info, tokenizer=tok, tokenizer_missing_reason=info.tokenizer_missing_reason)


def _text_bytes(text, what):
    """str -> UTF-8 (lone surrogates pass through as the ill-formed bytes they
    are, so the server names the text and byte offset); bytes as given."""
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"{what} must be str or bytes, not {type(text).__name__}")


def _is_id(v):
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)


def _ids(seq, what):
    """A sequence of token ids -> list of int (TypeError naming `what`)."""
    if isinstance(seq, np.ndarray):
        if seq.ndim != 1 or not np.issubdtype(seq.dtype, np.integer):
            raise TypeError(f"{what} must be a 1-D integer array, got shape {seq.shape} "
                            f"dtype {seq.dtype}")
        return [int(v) for v in seq]
    out = []
    for j, v in enumerate(seq):
        if not _is_id(v):
            raise TypeError(f"{what}[{j}] must be an int, not {type(v).__name__}")
        out.append(int(v))
    return out


def _is_single_id_sequence(ids):
    """True for one id sequence ([1, 403], (), a 1-D array); False for a
    list of sequences ([[1, 403], [407]])."""
    if isinstance(ids, np.ndarray):
        return ids.ndim == 1
    return len(ids) == 0 or _is_id(ids[0])


_TOKEN_TYPE_PREFIX = "TOKEN_TYPE_"


def _vocab_entry(e):
    return VocabEntry(id=e.id, piece=bytes(e.piece), token_bytes=bytes(e.token_bytes),
                      type=tokenizer_pb2.TokenType.Name(e.type)[len(_TOKEN_TYPE_PREFIX):],
                      score=e.score)


class IncrementalDecoder:
    """Text for a generation loop, one step at a time (Detokenize incremental).

        dec = client.incremental_decoder(skip_special_tokens=True)
        for token in generated:
            print(dec.push([token]), end="", flush=True)

    push(new_ids) returns only the text the new ids complete (never part of
    a UTF-8 character: a character split over byte tokens comes out with
    the id that completes it); finish(new_ids=()) ends the stream: it also
    returns what is held back, an incomplete character as U+FFFD, so the
    concatenated pushes and finish equal detokenize(ids). ids: every id
    pushed so far; held_back_bytes: bytes of an incomplete character
    waiting at the end (0..3).
    """

    def __init__(self, client, previous_ids=(), *, skip_special_tokens=False, model=None):
        self._client = client
        self._skip = skip_special_tokens
        self._model = model
        self.ids = _ids(previous_ids, "previous_ids")
        self.held_back_bytes = 0

    def push(self, new_ids) -> str:
        return self._step(new_ids, False)

    def finish(self, new_ids=()) -> str:
        return self._step(new_ids, True)

    def _step(self, new_ids, end_of_stream) -> str:
        new = _ids(new_ids, "new_ids")
        r = self._client.detokenize_incremental(self.ids, new, model=self._model,
                                                skip_special_tokens=self._skip,
                                                end_of_stream=end_of_stream)
        self.ids.extend(new)
        self.held_back_bytes = r.held_back_bytes
        return r.text


class VocabdClient:
    """Client for one vocabd server.

        with VocabdClient("127.0.0.1:50051") as c:
            rows = c.embed([1, 403, 407])            # numpy [3, hidden_size]

    target: "host:port". tls: False (plaintext), True (system roots) or a Tls.
    token: bearer token sent as "authorization: Bearer <token>" (needs TLS,
    as the server refuses tokens in plaintext). timeout: seconds per call
    (None = no deadline). model: default model name for every call ("" = the
    server's default).
    lb_policy: "round_robin" spreads calls over every address of the target
    (a "dns:///name:port" that resolves to each replica, such as a
    Kubernetes headless Service, or "ipv4:10.0.0.2:50051,10.0.0.3:50051");
    None = gRPC's default, pick_first. service_config: gRPC service config
    JSON (default DEFAULT_SERVICE_CONFIG: retries UNAVAILABLE and
    server-side CANCELLED on the RPCs that are safe to retry); None = every
    call sent once. options: extra gRPC channel arguments. Answers of any
    size are accepted (grpc.max_receive_message_length -1 unless options
    sets it): gRPC's default of 4 MiB would refuse, for example, the logits
    of 9 rows of a 128,256-token vocabulary.
    """

    def __init__(self, target, tls=False, token=None, *, timeout=None, model="",
                 options=None, lb_policy=None, service_config=DEFAULT_SERVICE_CONFIG):
        if token is not None and not tls:
            raise ValueError("token needs tls: bearer tokens must not travel in plaintext")
        if lb_policy not in (None, "round_robin", "pick_first"):
            raise ValueError(f"lb_policy = {lb_policy!r} must be 'round_robin', 'pick_first' "
                             "or None")
        self._tls = bool(tls)
        # What error hints look at: the Tls settings (cert, server_name).
        self._tls_cfg = (tls if isinstance(tls, Tls) else Tls()) if tls else None
        self._timeout = timeout
        self._model = model
        opts = list(options or [])
        if not any(key == "grpc.max_receive_message_length" for key, _ in opts):
            opts.append(("grpc.max_receive_message_length", -1))
        if service_config is not None:
            opts.append(("grpc.service_config", service_config))
        if lb_policy is not None:
            opts.append(("grpc.lb_policy_name", lb_policy))
        if tls:
            cfg = tls if isinstance(tls, Tls) else Tls()
            creds = grpc.ssl_channel_credentials(root_certificates=_pem(cfg.ca),
                                                 private_key=_pem(cfg.key),
                                                 certificate_chain=_pem(cfg.cert))
            if token is not None:
                creds = grpc.composite_channel_credentials(
                    creds, grpc.access_token_call_credentials(token))
            if cfg.server_name:
                opts.append(("grpc.ssl_target_name_override", cfg.server_name))
            self._channel = grpc.secure_channel(target, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(target, options=opts)
        self._embedding = embedding_pb2_grpc.EmbeddingServiceStub(self._channel)
        self._scoring = scoring_pb2_grpc.ScoringServiceStub(self._channel)
        self._position = position_pb2_grpc.PositionServiceStub(self._channel)
        self._models = model_pb2_grpc.ModelServiceStub(self._channel)
        self._tokenizer = tokenizer_pb2_grpc.TokenizerServiceStub(self._channel)

    # -- plumbing ---------------------------------------------------------
    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self._tls_cfg) from None

    def _stream(self, method, requests, convert):
        try:
            for resp in method(requests, timeout=self._timeout):
                yield convert(resp)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self._tls_cfg) from None

    def _name(self, model):
        return self._model if model is None else model

    # -- EmbeddingService -------------------------------------------------
    def _embed_request(self, sequences, model, position_offset, position_ids,
                       absolute_positions, output_dtype, allow_beyond_trained_length,
                       request_id):
        req = embedding_pb2.EmbedRequest(
            model=self._name(model), request_id=request_id,
            absolute_positions=_choice(_ABSOLUTE, absolute_positions, "absolute_positions"),
            output_dtype=_tensor.dtype_enum(output_dtype),
            allow_beyond_trained_length=allow_beyond_trained_length)
        for i, ids in enumerate(sequences):
            seq = req.sequences.add()
            seq.token_ids.extend(int(t) for t in ids)
            offsets = position_offset if isinstance(position_offset, (list, tuple)) else None
            seq.position_offset = int(offsets[i] if offsets else position_offset)
            if position_ids is not None:
                seq.position_ids.extend(int(p) for p in position_ids[i])
        return req

    def embed(self, ids: Sequence[int], *, model=None, position_offset=0, position_ids=None,
              absolute_positions=None, output_dtype="f32",
              allow_beyond_trained_length=False, request_id="") -> np.ndarray:
        """Token ids (one sequence) -> embeddings, numpy [len(ids), hidden_size]
        (float32; float16 for output_dtype="f16"; bf16 widened to float32).
        absolute_positions: None (model default), "none", "sinusoidal", "learned"."""
        req = self._embed_request([ids], model, position_offset,
                                  None if position_ids is None else [position_ids],
                                  absolute_positions, output_dtype,
                                  allow_beyond_trained_length, request_id)
        return _tensor.decode(self._call(self._embedding.Embed, req).embeddings)

    def embed_batch(self, sequences: Sequence[Sequence[int]], *, model=None, position_offset=0,
                    absolute_positions=None, output_dtype="f32",
                    allow_beyond_trained_length=False) -> List[np.ndarray]:
        """A ragged batch in one call -> one [len(seq), hidden_size] array per sequence.
        position_offset: one int for all, or one per sequence."""
        req = self._embed_request(sequences, model, position_offset, None, absolute_positions,
                                  output_dtype, allow_beyond_trained_length, "")
        resp = self._call(self._embedding.Embed, req)
        rows = _tensor.decode(resp.embeddings)
        o = list(resp.sequence_offsets)
        return [rows[o[i]:o[i + 1]] for i in range(len(o) - 1)]

    def embed_stream(self, requests: Iterable[Sequence[int]], *, model=None,
                     output_dtype="f32") -> Iterator[np.ndarray]:
        """EmbedStream: one [len(ids), hidden_size] array per id sequence, in
        order. The first failing request raises VocabdError whose
        request_index names it."""
        reqs = (self._embed_request([ids], model, 0, None, None, output_dtype, False, "")
                for ids in requests)
        return self._stream(self._embedding.EmbedStream, reqs,
                            lambda r: _tensor.decode(r.embeddings))

    # -- ScoringService ---------------------------------------------------
    def _score_request(self, hidden, targets, top_k, model, temperature, apply_final_norm,
                       vocab_limit, request_id, candidate_ids=None, return_pieces=False,
                       allow_non_finite=False):
        req = scoring_pb2.ScoreRequest(model=self._name(model), hidden=_float_tensor(hidden),
                                       top_k=top_k, temperature=temperature,
                                       vocab_limit=vocab_limit, request_id=request_id,
                                       return_pieces=return_pieces,
                                       allow_non_finite=allow_non_finite)
        if targets is not None:
            req.target_ids.extend(int(t) for t in targets)
        if candidate_ids is not None:
            req.candidate_ids.extend(_ids(candidate_ids, "candidate_ids"))
        if apply_final_norm is not None:
            req.apply_final_norm = apply_final_norm
        return req

    def score(self, hidden, targets: Optional[Sequence[int]] = None, top_k: int = 0, *,
              model=None, temperature=0.0, apply_final_norm=None, vocab_limit=0,
              candidate_ids: Optional[Sequence[int]] = None, return_pieces=False,
              allow_non_finite=False, request_id="") -> ScoreResult:
        """hidden [N, hidden_size] (+ one target id per row) -> per-row scores.
        temperature 0 = 1.0; apply_final_norm None = the server default (on).
        candidate_ids (<= 4096 ids, duplicates allowed): every row's
        RowScore.candidates holds their exact log-probs in this order,
        wherever they rank (multiple choice, classification).
        return_pieces: every top_k entry, candidate and target carries its
        piece and token_bytes (FAILED_PRECONDITION without a tokenizer).
        allow_non_finite: score rows holding NaN/Inf (their results are NaN)
        instead of refusing them with INVALID_ARGUMENT naming hidden[r, c]."""
        req = self._score_request(hidden, targets, top_k, model, temperature, apply_final_norm,
                                  vocab_limit, request_id, candidate_ids, return_pieces,
                                  allow_non_finite)
        return _score_result(self._call(self._scoring.Score, req), return_pieces,
                             targets is not None)

    def score_stream(self, requests: Iterable[Tuple], *, model=None, top_k=0,
                     candidate_ids=None, return_pieces=False,
                     allow_non_finite=False) -> Iterator[ScoreResult]:
        """ScoreStream: requests yields (hidden, targets) pairs (targets may be
        None); one ScoreResult per request, in order. The first failing request
        raises VocabdError whose request_index names it. candidate_ids and
        return_pieces and allow_non_finite apply to every request (see score)."""
        pending = []

        def reqs():
            for h, t in requests:
                pending.append(t is not None)
                yield self._score_request(h, t, top_k, model, 0.0, None, 0, "", candidate_ids,
                                          return_pieces, allow_non_finite)

        return self._stream(self._scoring.ScoreStream, reqs(),
                            lambda r: _score_result(r, return_pieces, pending.pop(0)))

    def compute_logits(self, hidden, *, model=None, log_softmax=False, temperature=0.0,
                       apply_final_norm=None, output_dtype="f32", vocab_limit=0,
                       allow_non_finite=False) -> np.ndarray:
        """hidden [N, hidden_size] -> logits (or logprobs) numpy [N, vocab_size].
        allow_non_finite: compute rows holding NaN/Inf instead of refusing them."""
        req = scoring_pb2.ComputeLogitsRequest(
            model=self._name(model), hidden=_float_tensor(hidden),
            temperature=temperature, log_softmax=log_softmax,
            output_dtype=_tensor.dtype_enum(output_dtype), vocab_limit=vocab_limit,
            allow_non_finite=allow_non_finite)
        if apply_final_norm is not None:
            req.apply_final_norm = apply_final_norm
        return _tensor.decode(self._call(self._scoring.ComputeLogits, req).logits)

    # -- PositionService --------------------------------------------------
    def apply_rope(self, q, k, positions=None, *, layout="bhsd", model=None,
                   position_offsets=None, sequence_lengths=None,
                   allow_beyond_trained_length=False, high_precision=False,
                   pair_layout=None, allow_non_finite=False) -> Tuple[np.ndarray, np.ndarray]:
        """Rotates q and k (numpy, layout "bhsd" [B,H,S,D], "bshd" or "thd")
        with the model's RoPE; returns (q, k) in the same shapes and dtypes.
        positions: explicit position ids [B, S] ([T] for thd), or None to use
        position_offsets (one start per sequence; None = 0).
        pair_layout: None (model's), "interleaved" or "half_split".
        allow_non_finite: rotate q/k holding NaN/Inf as given instead of
        refusing them."""
        req = position_pb2.ApplyRopeRequest(
            model=self._name(model), layout=_choice(_LAYOUTS, layout, "layout"),
            q=_tensor.encode(q), k=_tensor.encode(k),
            allow_beyond_trained_length=allow_beyond_trained_length,
            high_precision=high_precision, allow_non_finite=allow_non_finite)
        if positions is not None:
            req.position_ids.CopyFrom(_tensor.encode(np.asarray(positions, dtype=np.int64)))
        if position_offsets is not None:
            req.position_offsets.extend(int(p) for p in position_offsets)
        if sequence_lengths is not None:
            req.sequence_lengths.extend(int(n) for n in sequence_lengths)
        if pair_layout is not None:
            req.rope.pair_layout = _choice({"interleaved": rope_pb2.INTERLEAVED,
                                            "half_split": rope_pb2.HALF_SPLIT},
                                           pair_layout, "pair_layout")
        resp = self._call(self._position.ApplyRope, req)
        return _tensor.decode(resp.q), _tensor.decode(resp.k)

    # -- ModelService -----------------------------------------------------
    def models(self) -> List[Model]:
        """Every model the server knows (READY, FAILED with its reason, and a
        repository's loadable folders as AVAILABLE)."""
        resp = self._call(self._models.ListModels, model_pb2.ListModelsRequest())
        return [_model(m) for m in resp.models]

    def get_model(self, name="") -> Model:
        return _model(self._call(self._models.GetModel, model_pb2.GetModelRequest(name=name)))

    def load_model(self, name) -> Model:
        return _model(self._call(self._models.LoadModel, model_pb2.LoadModelRequest(name=name)))

    def unload_model(self, name) -> None:
        self._call(self._models.UnloadModel, model_pb2.UnloadModelRequest(name=name))

    # -- TokenizerService -------------------------------------------------
    def tokenize(self, text: Union[str, bytes, Sequence[Union[str, bytes]]], *,
                 add_special_tokens=True, return_pieces=False, return_offsets=False,
                 model=None, request_id=""):
        """Text -> token ids with the model's own tokenizer (Tokenize).

        text: one str (sent as UTF-8) or bytes (UTF-8; ill-formed bytes get
        INVALID_ARGUMENT `texts[i]: invalid UTF-8 at byte offset k`), or a
        list of them (one call). add_special_tokens: BOS for Llama /
        SentencePiece, [CLS] ... [SEP] for BERT (Hugging Face's default).
        Returns the ids (list of int; a list of lists for a list of texts),
        or a Tokenized per text when return_pieces or return_offsets asks
        for more (offsets are byte offsets into the UTF-8 text)."""
        single = isinstance(text, (str, bytes, bytearray, memoryview))
        try:
            texts = [text] if single else list(text)
        except TypeError:
            raise TypeError(f"text must be str or bytes (or a list of them), not "
                            f"{type(text).__name__}") from None
        req = tokenizer_pb2.TokenizeRequest(
            model=self._name(model), request_id=request_id,
            texts=[_text_bytes(t, "text" if single else f"texts[{i}]")
                   for i, t in enumerate(texts)],
            add_special_tokens=bool(add_special_tokens), return_pieces=return_pieces,
            return_offsets=return_offsets)
        resp = self._call(self._tokenizer.Tokenize, req)
        if return_pieces or return_offsets:
            out = [Tokenized(ids=list(r.ids),
                             pieces=[bytes(p) for p in r.pieces] if return_pieces else None,
                             token_bytes=([bytes(b) for b in r.token_bytes]
                                          if return_pieces else None),
                             offsets=([(o.begin, o.end) for o in r.offsets]
                                      if return_offsets else None))
                   for r in resp.results]
        else:
            out = [list(r.ids) for r in resp.results]
        return out[0] if single else out

    def detokenize(self, ids, *, skip_special_tokens=False, model=None, request_id=""):
        """Token ids -> text (Detokenize). ids: one sequence (list of int or a
        1-D integer array) -> str, or a list of sequences -> list of str.
        Ill-formed UTF-8 (a byte token cut off at the end) becomes U+FFFD, as
        Hugging Face's decode does; skip_special_tokens drops BOS, EOS, ...
        Ids outside [0, vocab_size): INVALID_ARGUMENT naming
        `sequences[b].ids[j]`."""
        if not isinstance(ids, (list, tuple, np.ndarray)):
            ids = list(ids)  # any iterable (a generator is read once)
        single = _is_single_id_sequence(ids)
        seqs = [ids] if single else list(ids)
        req = tokenizer_pb2.DetokenizeRequest(model=self._name(model), request_id=request_id,
                                              skip_special_tokens=skip_special_tokens)
        for b, seq in enumerate(seqs):
            req.sequences.add().ids.extend(_ids(seq, "ids" if single else f"ids[{b}]"))
        texts = [r.text for r in self._call(self._tokenizer.Detokenize, req).results]
        return texts[0] if single else texts

    def detokenize_incremental(self, previous_ids, new_ids, *, skip_special_tokens=False,
                               model=None, request_id="", end_of_stream=False) -> IncrementalText:
        """Detokenize's incremental mode: the text new_ids complete beyond
        decode(previous_ids) (previous_ids: every id before new_ids, may be
        empty). A trailing incomplete UTF-8 character is held back
        (held_back_bytes) until later ids complete it, so concatenating the
        texts of a generation loop gives the decoded text, never a broken
        character. end_of_stream=True (the stream's last call) also returns
        what is held back, an incomplete character as U+FFFD
        (held_back_bytes 0). IncrementalDecoder (incremental_decoder())
        keeps previous_ids for you."""
        req = tokenizer_pb2.DetokenizeRequest(model=self._name(model), request_id=request_id,
                                              skip_special_tokens=skip_special_tokens,
                                              incremental=True)
        seq = req.sequences.add()
        seq.previous_ids.extend(_ids(previous_ids, "previous_ids"))
        seq.ids.extend(_ids(new_ids, "new_ids"))
        seq.end_of_stream = end_of_stream
        r = self._call(self._tokenizer.Detokenize, req).results[0]
        return IncrementalText(text=r.text, held_back_bytes=r.held_back_bytes)

    def incremental_decoder(self, previous_ids=(), *, skip_special_tokens=False,
                            model=None) -> IncrementalDecoder:
        """An IncrementalDecoder starting after previous_ids (e.g. the prompt)."""
        return IncrementalDecoder(self, previous_ids, skip_special_tokens=skip_special_tokens,
                                  model=model)

    def vocabulary(self, start_id=0, page_size=0, *, model=None) -> VocabularyPage:
        """One page of the vocabulary (GetVocabulary): ids start_id .. (at
        most page_size of them; 0 = 1000, at most 10000). start_id in
        [0, vocab_size]; the page's next_start_id is the next call's."""
        req = tokenizer_pb2.GetVocabularyRequest(model=self._name(model), start_id=start_id,
                                                 page_size=page_size)
        resp = self._call(self._tokenizer.GetVocabulary, req)
        return VocabularyPage(entries=[_vocab_entry(e) for e in resp.entries],
                              vocab_size=resp.vocab_size, next_start_id=resp.next_start_id,
                              model=resp.model)

    def iter_vocabulary(self, page_size=0, *, model=None) -> Iterator[VocabEntry]:
        """Every VocabEntry, id 0 .. vocab_size - 1, a page per call."""
        start = 0
        while True:
            page = self.vocabulary(start, page_size, model=model)
            yield from page.entries
            if page.next_start_id >= page.vocab_size or page.next_start_id <= start:
                return
            start = page.next_start_id
