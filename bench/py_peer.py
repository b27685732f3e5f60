#!/usr/bin/python3
"""The peer a user might write instead of vocabd: a Python gRPC server
(Debian python3-grpcio) answering vocabd's Embed, ComputeLogits, Score and
GetModel RPCs with NumPy, for the end-to-end benchmark (bench/e2e.sh).

    /usr/bin/python3 bench/py_peer.py --checkpoint DIR --listen 127.0.0.1:50762 \
        --gen-dir /tmp/vocabd_pygen [--workers 16]

DIR holds config.json + model.safetensors (F32, e.g. from
bench/make_synthetic_model.py). Stubs come from Debian's protoc +
grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc), generated into
--gen-dir when missing. Same maths as vocabd: embedding rows (bit-exact), HF
LlamaRMSNorm in float32, logits = y @ W^T (float32 BLAS), float64 logsumexp,
rank = 1 + #{l_j > l_t} + #{j < t : l_j == l_t}, top-k by log-prob.
"""
import argparse
import concurrent.futures
import json
import mmap
import os
import signal
import struct
import subprocess
import sys
import threading

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate_stubs(gen_dir):
    if os.path.exists(os.path.join(gen_dir, "vocabd", "v1", "scoring_pb2_grpc.py")):
        return
    os.makedirs(gen_dir, exist_ok=True)
    protos = [os.path.join("vocabd", "v1", p) for p in
              ("tensor.proto", "rope.proto", "model.proto", "embedding.proto", "scoring.proto",
               "position.proto")]
    subprocess.run(["protoc", "-I", os.path.join(REPO, "proto"), f"--python_out={gen_dir}",
                    f"--grpc_python_out={gen_dir}",
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin"] + protos,
                   check=True)


def load_safetensors(path):
    f = open(path, "rb")
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    (n,) = struct.unpack("<Q", m[:8])
    header = json.loads(m[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {meta['dtype']}; this peer reads F32 only")
        begin, end = meta["data_offsets"]
        out[name] = np.frombuffer(m, dtype="<f4", count=(end - begin) // 4,
                                  offset=8 + n + begin).reshape(meta["shape"])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--listen", default="127.0.0.1:50762")
    parser.add_argument("--gen-dir", default="/tmp/vocabd_pygen")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--model", default="py-peer")
    args = parser.parse_args()

    generate_stubs(args.gen_dir)
    sys.path.insert(0, args.gen_dir)
    import grpc
    from vocabd.v1 import embedding_pb2, embedding_pb2_grpc, model_pb2, model_pb2_grpc
    from vocabd.v1 import scoring_pb2, scoring_pb2_grpc, tensor_pb2

    with open(os.path.join(args.checkpoint, "config.json")) as f:
        config = json.load(f)
    tensors = load_safetensors(os.path.join(args.checkpoint, "model.safetensors"))
    table = tensors["model.embed_tokens.weight"]
    head = tensors.get("lm_head.weight", table)
    norm_w = tensors["model.norm.weight"]
    eps = float(config.get("rms_norm_eps", 1e-5))
    vocab, hidden = table.shape

    info = model_pb2.ModelInfo(
        name=args.model, state=model_pb2.READY, architecture="llama", vocab_size=vocab,
        hidden_size=hidden, num_attention_heads=config.get("num_attention_heads", 0),
        num_key_value_heads=config.get("num_key_value_heads", 0),
        head_dim=hidden // max(1, config.get("num_attention_heads", 1)), dtype=tensor_pb2.F32,
        tie_word_embeddings=True, is_default=True)

    np_dtype = {tensor_pb2.F32: np.float32, tensor_pb2.F16: np.float16}

    def encode(array, dtype):
        dtype = dtype or tensor_pb2.F32
        if dtype == tensor_pb2.BF16:  # round to nearest even on the upper 16 bits
            bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
            bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            data = bits.tobytes()
        else:
            data = np.ascontiguousarray(array, dtype=np_dtype[dtype]).tobytes()
        return tensor_pb2.Tensor(dtype=dtype, shape=list(array.shape), data=data)

    def decode_hidden(t, context):
        if t.dtype in (tensor_pb2.F32, tensor_pb2.DTYPE_UNSPECIFIED):
            x = np.frombuffer(t.data, dtype="<f4")
        elif t.dtype == tensor_pb2.F16:
            x = np.frombuffer(t.data, dtype="<f2").astype(np.float32)
        elif t.dtype == tensor_pb2.BF16:
            x = (np.frombuffer(t.data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"hidden.dtype = {t.dtype}")
        if len(t.shape) != 2 or t.shape[1] != hidden or x.size != t.shape[0] * hidden:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"hidden.shape = {list(t.shape)}, expected [N, {hidden}]")
        return x.reshape(t.shape[0], hidden)

    def logits_of(request, context):
        x = decode_hidden(request.hidden, context)
        if not request.HasField("apply_final_norm") or request.apply_final_norm:
            var = np.mean(x * x, axis=1, keepdims=True, dtype=np.float32)
            x = (x / np.sqrt(var + np.float32(eps))) * norm_w
        logits = x @ head.T
        if request.temperature not in (0.0, 1.0):
            logits = logits / np.float32(request.temperature)
        if 0 < request.vocab_limit < vocab:
            logits[:, request.vocab_limit:] = -np.inf
        return logits

    def logsumexp(logits):
        m = logits.max(axis=1, keepdims=True).astype(np.float64)
        return (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True))).ravel()

    class Models(model_pb2_grpc.ModelServiceServicer):
        def GetModel(self, request, context):
            return info

        def ListModels(self, request, context):
            return model_pb2.ListModelsResponse(models=[info])

    class Embedding(embedding_pb2_grpc.EmbeddingServiceServicer):
        def Embed(self, request, context):
            ids = np.concatenate([np.asarray(s.token_ids, dtype=np.int64) for s in request.sequences]) \
                if request.sequences else np.zeros(0, dtype=np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= vocab):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"token id outside [0, {vocab})")
            offsets = np.cumsum([0] + [len(s.token_ids) for s in request.sequences])
            return embedding_pb2.EmbedResponse(
                embeddings=encode(table[ids], request.output_dtype),
                sequence_offsets=offsets.tolist(), model=args.model, request_id=request.request_id)

    class Scoring(scoring_pb2_grpc.ScoringServiceServicer):
        def ComputeLogits(self, request, context):
            logits = logits_of(request, context)
            if request.log_softmax:
                logits = (logits - logsumexp(logits)[:, None]).astype(np.float32)
            return scoring_pb2.ComputeLogitsResponse(logits=encode(logits, request.output_dtype),
                                                     model=args.model)

        def Score(self, request, context):
            logits = logits_of(request, context)
            lse = logsumexp(logits)
            rows = []
            targets = list(request.target_ids)
            if targets and len(targets) != logits.shape[0]:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "target_ids: one per row")
            total = 0.0
            for r in range(logits.shape[0]):
                row = scoring_pb2.RowScore(logsumexp=float(lse[r]))
                l = logits[r]
                if targets:
                    t = targets[r]
                    row.target_logprob = float(l[t] - lse[r])
                    row.target_rank = int(1 + np.count_nonzero(l > l[t]) + np.count_nonzero(l[:t] == l[t]))
                    total += row.target_logprob
                k = min(request.top_k, vocab)
                if k > 0:
                    best = np.argpartition(-l, k - 1)[:k]
                    best = best[np.lexsort((best, -l[best]))]
                    for j in best:
                        row.top_k.add(token_id=int(j), logprob=float(l[j] - lse[r]))
                rows.append(row)
            return scoring_pb2.ScoreResponse(rows=rows, sum_target_logprob=total,
                                             num_targets=len(targets), model=args.model)

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=args.workers),
                         options=[("grpc.max_receive_message_length", 64 << 20),
                                  ("grpc.max_send_message_length", 256 << 20)])
    model_pb2_grpc.add_ModelServiceServicer_to_server(Models(), server)
    embedding_pb2_grpc.add_EmbeddingServiceServicer_to_server(Embedding(), server)
    scoring_pb2_grpc.add_ScoringServiceServicer_to_server(Scoring(), server)
    port = server.add_insecure_port(args.listen)
    if port == 0:
        raise SystemExit(f"cannot listen on {args.listen}")
    server.start()
    print(f"py_peer listening on port {port} ({args.workers} workers)", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    server.stop(2)


if __name__ == "__main__":
    main()
