"""VocabdClient: a small typed wrapper over the generated vocabd.v1 stubs.

Every method raises VocabdError (vocabd/errors.py) on a failed call, with the
gRPC status code and the server's message.
"""
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import grpc
import numpy as np

from vocabd import _tensor
from vocabd.errors import VocabdError, from_rpc_error
from vocabd.v1 import (embedding_pb2, embedding_pb2_grpc, model_pb2, model_pb2_grpc,
                       position_pb2, position_pb2_grpc, rope_pb2, scoring_pb2,
                       scoring_pb2_grpc)


@dataclass
class TopToken:
    token_id: int
    logprob: float


@dataclass
class RowScore:
    """One hidden row's scores (scoring.proto RowScore)."""
    target_logprob: float
    target_rank: int
    logsumexp: float
    top_k: List[TopToken]


@dataclass
class ScoreResult:
    rows: List[RowScore]
    sum_target_logprob: float
    num_targets: int
    model: str
    request_id: str = ""


@dataclass
class Model:
    """A model the server knows (model.proto ModelInfo); `info` is the full message."""
    name: str
    state: str          # "READY", "LOADING", "FAILED", "UNLOADING", "AVAILABLE"
    state_reason: str
    architecture: str
    vocab_size: int
    hidden_size: int
    dtype: str
    is_default: bool
    info: model_pb2.ModelInfo = field(repr=False)


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


def _row_score(r):
    return RowScore(target_logprob=r.target_logprob, target_rank=r.target_rank,
                    logsumexp=r.logsumexp,
                    top_k=[TopToken(t.token_id, t.logprob) for t in r.top_k])


def _score_result(resp):
    return ScoreResult(rows=[_row_score(r) for r in resp.rows],
                       sum_target_logprob=resp.sum_target_logprob,
                       num_targets=resp.num_targets, model=resp.model,
                       request_id=resp.request_id)


def _model(info):
    return Model(name=info.name, state=model_pb2.ModelState.Name(info.state),
                 state_reason=info.state_reason, architecture=info.architecture,
                 vocab_size=info.vocab_size, hidden_size=info.hidden_size,
                 dtype=_tensor.tensor_pb2.DType.Name(info.dtype), is_default=info.is_default,
                 info=info)


class VocabdClient:
    """Client for one vocabd server.

        with VocabdClient("127.0.0.1:50051") as c:
            rows = c.embed([1, 403, 407])            # numpy [3, hidden_size]

    target: "host:port". tls: False (plaintext), True (system roots) or a Tls.
    token: bearer token sent as "authorization: Bearer <token>" (needs TLS,
    as the server refuses tokens in plaintext). timeout: seconds per call
    (None = no deadline). model: default model name for every call ("" = the
    server's default).
    """

    def __init__(self, target, tls=False, token=None, *, timeout=None, model="",
                 options=None):
        if token is not None and not tls:
            raise ValueError("token needs tls: bearer tokens must not travel in plaintext")
        self._tls = bool(tls)
        self._timeout = timeout
        self._model = model
        opts = list(options or [])
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
            raise from_rpc_error(e, self._tls) from None

    def _stream(self, method, requests, convert):
        try:
            for resp in method(requests, timeout=self._timeout):
                yield convert(resp)
        except grpc.RpcError as e:
            raise from_rpc_error(e, self._tls) from None

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
                       vocab_limit, request_id):
        req = scoring_pb2.ScoreRequest(model=self._name(model), hidden=_float_tensor(hidden),
                                       top_k=top_k, temperature=temperature,
                                       vocab_limit=vocab_limit, request_id=request_id)
        if targets is not None:
            req.target_ids.extend(int(t) for t in targets)
        if apply_final_norm is not None:
            req.apply_final_norm = apply_final_norm
        return req

    def score(self, hidden, targets: Optional[Sequence[int]] = None, top_k: int = 0, *,
              model=None, temperature=0.0, apply_final_norm=None, vocab_limit=0,
              request_id="") -> ScoreResult:
        """hidden [N, hidden_size] (+ one target id per row) -> per-row scores.
        temperature 0 = 1.0; apply_final_norm None = the server default (on)."""
        req = self._score_request(hidden, targets, top_k, model, temperature, apply_final_norm,
                                  vocab_limit, request_id)
        return _score_result(self._call(self._scoring.Score, req))

    def score_stream(self, requests: Iterable[Tuple], *, model=None, top_k=0) -> Iterator[ScoreResult]:
        """ScoreStream: requests yields (hidden, targets) pairs (targets may be
        None); one ScoreResult per request, in order. The first failing request
        raises VocabdError whose request_index names it."""
        reqs = (self._score_request(h, t, top_k, model, 0.0, None, 0, "") for h, t in requests)
        return self._stream(self._scoring.ScoreStream, reqs, _score_result)

    def compute_logits(self, hidden, *, model=None, log_softmax=False, temperature=0.0,
                       apply_final_norm=None, output_dtype="f32", vocab_limit=0) -> np.ndarray:
        """hidden [N, hidden_size] -> logits (or logprobs) numpy [N, vocab_size]."""
        req = scoring_pb2.ComputeLogitsRequest(
            model=self._name(model), hidden=_float_tensor(hidden),
            temperature=temperature, log_softmax=log_softmax,
            output_dtype=_tensor.dtype_enum(output_dtype), vocab_limit=vocab_limit)
        if apply_final_norm is not None:
            req.apply_final_norm = apply_final_norm
        return _tensor.decode(self._call(self._scoring.ComputeLogits, req).logits)

    # -- PositionService --------------------------------------------------
    def apply_rope(self, q, k, positions=None, *, layout="bhsd", model=None,
                   position_offsets=None, sequence_lengths=None,
                   allow_beyond_trained_length=False, high_precision=False,
                   pair_layout=None) -> Tuple[np.ndarray, np.ndarray]:
        """Rotates q and k (numpy, layout "bhsd" [B,H,S,D], "bshd" or "thd")
        with the model's RoPE; returns (q, k) in the same shapes and dtypes.
        positions: explicit position ids [B, S] ([T] for thd), or None to use
        position_offsets (one start per sequence; None = 0).
        pair_layout: None (model's), "interleaved" or "half_split"."""
        req = position_pb2.ApplyRopeRequest(
            model=self._name(model), layout=_choice(_LAYOUTS, layout, "layout"),
            q=_tensor.encode(q), k=_tensor.encode(k),
            allow_beyond_trained_length=allow_beyond_trained_length,
            high_precision=high_precision)
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
