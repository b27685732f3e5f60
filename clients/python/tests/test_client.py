"""VocabdClient against a live vocabd (conftest.py starts the built binary).

Golden values come from the stories260K checkpoint read in NumPy
(examples/stories260k_generate.py's Checkpoint), not from the server.
"""
import importlib.util
import os

import grpc
import numpy as np
import pytest

from vocabd import VocabdClient, VocabdError
from conftest import SOURCE_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "stories260k_generate", os.path.join(HERE, "..", "examples", "stories260k_generate.py"))
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

CKPT = example.Checkpoint(os.path.join(SOURCE_DIR, "models", "stories260K", "stories260K.bin"))


def numpy_head(hidden):
    """Final RMSNorm (eps 1e-5) + tied head in float64: logits [N, vocab]."""
    h = np.asarray(hidden, np.float64)
    x = h / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + 1e-5) * CKPT.rms_final
    return x @ CKPT.tok_embeddings.astype(np.float64).T


def numpy_rope_interleaved(x, positions, theta=10000.0):
    """Adjacent-pair RoPE (llama2.c run.c) on [..., S, D] with positions [S]."""
    D = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, D, 2) / D)
    ang = np.asarray(positions, np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    a, b = x[..., 0::2].astype(np.float64), x[..., 1::2].astype(np.float64)
    out = np.empty(x.shape, np.float64)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def test_embed_returns_the_checkpoint_rows(client):
    ids = [1, 403, 407, 0, 511]
    rows = client.embed(ids)
    assert rows.dtype == np.float32 and rows.shape == (5, 64)
    np.testing.assert_array_equal(rows, CKPT.tok_embeddings[ids])


def test_embed_f16_and_bf16_outputs(client):
    ids = [403, 407]
    f16 = client.embed(ids, output_dtype="f16")
    assert f16.dtype == np.float16
    np.testing.assert_array_equal(f16, CKPT.tok_embeddings[ids].astype(np.float16))
    bf16 = client.embed(ids, output_dtype="bf16")
    assert bf16.dtype == np.float32
    np.testing.assert_allclose(bf16, CKPT.tok_embeddings[ids], rtol=2 ** -8)


def test_embed_batch_splits_sequences(client):
    out = client.embed_batch([[1, 403], [407], [261, 378, 432]])
    assert [a.shape for a in out] == [(2, 64), (1, 64), (3, 64)]
    np.testing.assert_array_equal(out[2], CKPT.tok_embeddings[[261, 378, 432]])


def test_embed_sinusoidal_beyond_trained_length_needs_the_flag(client):
    with pytest.raises(VocabdError) as e:
        client.embed([1], absolute_positions="sinusoidal", position_offset=600)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "allow_beyond_trained_length" in e.value.message
    rows = client.embed([1], absolute_positions="sinusoidal", position_offset=600,
                        allow_beyond_trained_length=True)
    p, d = 600, 64
    i = np.arange(d // 2)
    pe = np.empty(d)
    pe[0::2] = np.sin(p / 10000 ** (2 * i / d))
    pe[1::2] = np.cos(p / 10000 ** (2 * i / d))
    np.testing.assert_allclose(rows[0], CKPT.tok_embeddings[1] + pe, atol=1e-5)


def test_score_matches_numpy_head(client):
    rng = np.random.default_rng(7)
    hidden = rng.standard_normal((3, 64)).astype(np.float32)
    targets = [403, 407, 2]
    res = client.score(hidden, targets, top_k=5)
    logits = numpy_head(hidden)
    lse = np.log(np.sum(np.exp(logits - logits.max(1, keepdims=True)), 1)) + logits.max(1)
    assert len(res.rows) == 3 and res.num_targets == 3
    for r, row in enumerate(res.rows):
        assert row.logsumexp == pytest.approx(lse[r], abs=1e-4)
        assert row.target_logprob == pytest.approx(logits[r, targets[r]] - lse[r], abs=1e-4)
        assert row.target_rank == 1 + int(np.sum(logits[r] > logits[r, targets[r]]))
        want = np.argsort(-logits[r], kind="stable")[:5]
        assert [t.token_id for t in row.top_k] == list(want)
    assert res.sum_target_logprob == pytest.approx(sum(r.target_logprob for r in res.rows),
                                                   abs=1e-6)


def test_compute_logits_and_log_softmax(client):
    hidden = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    logits = client.compute_logits(hidden)
    assert logits.shape == (2, 512) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, numpy_head(hidden), atol=1e-4, rtol=1e-5)
    lp = client.compute_logits(hidden, log_softmax=True, temperature=2.0)
    want = numpy_head(hidden) / 2.0
    want = want - np.log(np.sum(np.exp(want - want.max(1, keepdims=True)), 1,
                                keepdims=True)) - want.max(1, keepdims=True)
    np.testing.assert_allclose(lp, want, atol=1e-4)


def test_answers_above_grpc_default_4_mib_arrive(client):
    # 2,100 rows x 512 logits x 4 bytes = 4.3 MB, above gRPC's default
    # receive limit of 4 MiB (the client lifts it).
    hidden = np.random.default_rng(5).standard_normal((2100, 64)).astype(np.float32)
    logits = client.compute_logits(hidden)
    assert logits.shape == (2100, 512)
    np.testing.assert_allclose(logits[-3:], numpy_head(hidden[-3:]), atol=1e-4, rtol=1e-5)


def test_receive_limit_set_by_options_is_kept(vocabd_server):
    hidden = np.zeros((2, 64), dtype=np.float32)  # 4 KB of logits
    with VocabdClient(vocabd_server.target, model="stories260K",
                      options=[("grpc.max_receive_message_length", 1024)]) as c:
        with pytest.raises(VocabdError) as e:
            c.compute_logits(hidden)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_apply_rope_matches_numpy(client):
    rng = np.random.default_rng(11)
    q = rng.standard_normal((1, 8, 4, 8)).astype(np.float32)   # BHSD, 8 q heads
    k = rng.standard_normal((1, 4, 4, 8)).astype(np.float32)   # 4 kv heads
    qo, ko = client.apply_rope(q, k, position_offsets=[5])
    assert qo.shape == q.shape and ko.shape == k.shape and qo.dtype == np.float32
    pos = np.arange(5, 9)
    np.testing.assert_allclose(qo, numpy_rope_interleaved(q, pos), atol=2e-6)
    np.testing.assert_allclose(ko, numpy_rope_interleaved(k, pos), atol=2e-6)
    # Explicit position ids [B, S] give the same answer.
    qe, ke = client.apply_rope(q, k, positions=[[5, 6, 7, 8]])
    np.testing.assert_array_equal(qe, qo)
    np.testing.assert_array_equal(ke, ko)


def test_models_lists_both(client):
    models = {m.name: m for m in client.models()}
    assert set(models) == {"stories260K", "stories260K-hf"}
    m = models["stories260K"]
    assert (m.state, m.vocab_size, m.hidden_size, m.is_default) == ("READY", 512, 64, True)
    assert client.get_model("stories260K-hf").architecture


def test_errors_carry_code_and_message(client):
    with pytest.raises(VocabdError) as e:
        client.embed([1, 512])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.code_name == "INVALID_ARGUMENT"
    assert "512" in e.value.message and "token" in e.value.message
    with pytest.raises(VocabdError) as e:
        client.embed([1], model="no-such-model")
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert "no-such-model" in str(e.value)
    with pytest.raises(VocabdError) as e:
        client.score(np.zeros((2, 63), np.float32))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_score_stream_in_order_and_failing_index(client):
    rng = np.random.default_rng(5)
    hs = [rng.standard_normal((n, 64)).astype(np.float32) for n in (1, 2, 3)]
    reqs = [(h, [7] * len(h)) for h in hs]
    got = list(client.score_stream(reqs, top_k=1))
    assert [len(r.rows) for r in got] == [1, 2, 3]
    for h, r in zip(hs, got):
        assert r.rows[-1].top_k[0].token_id == int(np.argmax(numpy_head(h)[-1]))
    bad = reqs[:2] + [(hs[0], [9999])] + reqs
    results = []
    with pytest.raises(VocabdError) as e:
        for r in client.score_stream(bad):
            results.append(r)
    assert len(results) == 2
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.request_index == 2, e.value.message


def test_embed_stream_in_order_and_failing_index(client):
    seqs = [[1], [403, 407], [261, 378, 432]]
    got = list(client.embed_stream(seqs))
    assert len(got) == 3
    for s, a in zip(seqs, got):
        np.testing.assert_array_equal(a, CKPT.tok_embeddings[s])
    results = []
    with pytest.raises(VocabdError) as e:
        for a in client.embed_stream([[1], [512], [2]]):
            results.append(a)
    assert len(results) == 1 and e.value.request_index == 1


def test_token_without_tls_is_refused_locally():
    with pytest.raises(ValueError, match="needs tls"):
        VocabdClient("127.0.0.1:1", token="secret")


def test_unreachable_server_is_unavailable():
    with VocabdClient("127.0.0.1:1", timeout=5) as c:
        with pytest.raises(VocabdError) as e:
            c.models()
    assert e.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_f16_hidden_states_travel_as_f16(client):
    hidden = np.random.default_rng(9).standard_normal((2, 64)).astype(np.float16)
    a = client.score(hidden, [1, 2], top_k=3)
    b = client.score(hidden.astype(np.float32), [1, 2], top_k=3)
    assert [r.target_logprob for r in a.rows] == [r.target_logprob for r in b.rows]
    np.testing.assert_array_equal(client.compute_logits(hidden),
                                  client.compute_logits(hidden.astype(np.float32)))
    q = np.random.default_rng(1).standard_normal((1, 8, 2, 8)).astype(np.float16)
    k = np.ones((1, 4, 2, 8), np.float16)
    qo, ko = client.apply_rope(q, k)
    assert qo.dtype == np.float16 and ko.dtype == np.float16
    np.testing.assert_allclose(qo.astype(np.float64),
                               numpy_rope_interleaved(q.astype(np.float32), np.arange(2)),
                               atol=2e-3)
