"""VocabdClient's TokenizerService calls and Score's candidate_ids / return_pieces
against a live vocabd (conftest.py starts the built binary with stories260K
(llama2.c .bin + tok512.bin) and stories260K-hf (tokenizer.model)).

Golden values: tokenizer_golden.json, written by make_tokenizer_golden.py from
Debian python3-sentencepiece on models/stories260K-hf/tokenizer.model
(test_golden_file_is_sentencepiece_output re-runs it when sentencepiece is
importable). Log-probs: ComputeLogits(log_softmax=True) on the same server and
the NumPy head of test_client.py.
"""
import importlib.util
import json
import os
import shutil

import grpc
import numpy as np
import pytest

from vocabd import IncrementalText, Tokenized, VocabdClient, VocabdError
from conftest import SOURCE_DIR
from test_client import numpy_head

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "tokenizer_golden.json"), encoding="utf-8") as f:
    GOLDEN = json.load(f)
TEXTS = GOLDEN["texts"]
BOS = GOLDEN["bos_token_id"]
MODELS = ["stories260K", "stories260K-hf"]  # tok512.bin and tokenizer.model: same vocabulary


def test_golden_file_is_sentencepiece_output():
    try:
        import sentencepiece  # noqa: F401  (Debian python3-sentencepiece)
    except ImportError:
        pytest.skip("python3-sentencepiece is not installed: tokenizer_golden.json not re-derived")
    spec = importlib.util.spec_from_file_location(
        "make_tokenizer_golden", os.path.join(HERE, "make_tokenizer_golden.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert mod.main() == 0
    assert json.loads(buf.getvalue()) == GOLDEN


@pytest.mark.parametrize("model", MODELS)
def test_tokenize_once_upon_a_time(client, model):
    assert client.tokenize("Once upon a time", model=model) == [BOS, 403, 407, 261, 378]
    assert TEXTS[0]["ids"] == [403, 407, 261, 378]
    assert client.tokenize(b"Once upon a time", add_special_tokens=False,
                           model=model) == TEXTS[0]["ids"]


@pytest.mark.parametrize("model", MODELS)
def test_tokenize_batch_matches_sentencepiece(client, model):
    texts = [t["text"] for t in TEXTS]
    got = client.tokenize(texts, add_special_tokens=False, return_pieces=True,
                          return_offsets=True, model=model)
    assert len(got) == len(TEXTS)
    for g, want in zip(got, TEXTS):
        assert isinstance(g, Tokenized)
        assert g.ids == want["ids"], want["text"]
        assert g.pieces == [p.encode("utf-8") for p in want["pieces"]]
        assert g.token_bytes == [bytes.fromhex(b) for b in want["token_bytes"]]
        assert g.offsets == [tuple(o) for o in want["offsets"]]
        # The offsets cut the UTF-8 input into the tokens' bytes (a split
        # character's byte tokens share its span).
        raw = want["text"].encode("utf-8")
        assert raw[g.offsets[0][0]:g.offsets[-1][1]] == raw
    # bytes in = str in; plain ids for a list of texts without extras.
    assert client.tokenize([t.encode("utf-8") for t in texts], add_special_tokens=False,
                           model=model) == [t["ids"] for t in TEXTS]


def test_tokenize_special_tokens_pieces_and_offsets(client):
    g = client.tokenize("Once upon a time", return_pieces=True, return_offsets=True)
    assert g.ids == [BOS] + TEXTS[0]["ids"]
    assert g.pieces[0] == b"<s>" and g.token_bytes[1] == b" Once"
    assert g.offsets[0] == (0, 0)  # added BOS: empty span at 0
    only_offsets = client.tokenize("Once", return_offsets=True)
    assert only_offsets.pieces is None and only_offsets.token_bytes is None
    assert only_offsets.offsets == [(0, 0), (0, 4)]
    assert client.tokenize("") == [BOS]
    assert client.tokenize("", add_special_tokens=False) == []
    assert client.tokenize([]) == []


@pytest.mark.parametrize("model", MODELS)
def test_detokenize_round_trip(client, model):
    for t in TEXTS:
        assert client.detokenize(t["ids"], model=model) == t["decoded"] == t["text"]
        ids = client.tokenize(t["text"], model=model)
        assert client.detokenize(ids, skip_special_tokens=True, model=model) == t["text"]
        assert client.detokenize(ids, model=model) == "<s>" + t["text"]
    # A batch, numpy ids, an empty sequence.
    batch = [t["ids"] for t in TEXTS] + [np.asarray(TEXTS[0]["ids"], np.int32), []]
    assert client.detokenize(batch, model=model) == [t["text"] for t in TEXTS] + [TEXTS[0]["text"], ""]
    assert client.detokenize(np.asarray(TEXTS[1]["ids"]), model=model) == TEXTS[1]["text"]
    assert client.detokenize((i for i in TEXTS[0]["ids"]), model=model) == TEXTS[0]["text"]
    # A byte token cut off at the end decodes to U+FFFD (sentencepiece agrees).
    assert client.detokenize(GOLDEN["cut"]["ids"], model=model) == GOLDEN["cut"]["decoded"]


@pytest.mark.parametrize("model", MODELS)
def test_incremental_decode_never_splits_a_character(client, model):
    for t in TEXTS:
        ids, prev, pieces, held = t["ids"], [], [], []
        for i in ids:
            r = client.detokenize_incremental(prev, [i], model=model)
            assert isinstance(r, IncrementalText)
            assert "\ufffd" not in r.text, (t["text"], prev, i)
            pieces.append(r.text)
            held.append(r.held_back_bytes)
            prev.append(i)
        assert "".join(pieces) == t["text"]
        # Each byte token of a character waits for the rest of it.
        want_held = _held_back(t["token_bytes"])
        assert held == want_held, t["text"]
    # The split emoji: " " then F0 9F 98 80 -> "", "", "", "😀".
    emoji = TEXTS[1]
    start = emoji["ids"].index(243)
    outs = [client.detokenize_incremental(emoji["ids"][:j], [emoji["ids"][j]], model=model)
            for j in range(start, start + 4)]
    assert outs == [IncrementalText("", 1), IncrementalText("", 2), IncrementalText("", 3),
                    IncrementalText("\U0001F600", 0)]


def _held_back(token_bytes_hex):
    """held_back_bytes after each token: bytes of an incomplete UTF-8
    character at the end of the decoded bytes so far (0..3)."""
    out, buf = [], b""
    for tb in token_bytes_hex:
        buf += bytes.fromhex(tb)
        k = 0
        for n in range(1, min(3, len(buf)) + 1):  # a lead byte n bytes from the end
            c = buf[-n]
            if c >= 0xC0:
                need = 2 if c < 0xE0 else 3 if c < 0xF0 else 4
                k = n if need > n else 0
                break
            if c < 0x80:
                break
        out.append(k)
    return out


def test_incremental_decoder_chunks_and_prompt(client):
    for t in TEXTS:
        ids = t["ids"]
        for chunk in (1, 2, 3, 5):
            dec = client.incremental_decoder([BOS], skip_special_tokens=True)
            text = "".join(dec.push(ids[i:i + chunk]) for i in range(0, len(ids), chunk))
            assert text == t["text"], (t["text"], chunk)
            assert dec.ids == [BOS] + ids and dec.held_back_bytes == 0
    # Starting after a prompt: only the new text comes back.
    prompt = client.tokenize("Once upon")
    dec = client.incremental_decoder(prompt, skip_special_tokens=True)
    assert dec.push([261, 378]) == " a time"
    # Cut off mid-character: the held-back byte is reported, no U+FFFD.
    dec = client.incremental_decoder()
    assert dec.push(GOLDEN["cut"]["ids"]) == "\U0001F600 "
    assert dec.held_back_bytes == 1
    # End of stream: the held-back byte comes out as U+FFFD; the stream
    # then equals detokenize of all its ids.
    whole = client.detokenize(GOLDEN["cut"]["ids"])
    assert "\U0001F600 " + dec.finish() == whole and dec.held_back_bytes == 0
    assert client.incremental_decoder().finish(GOLDEN["cut"]["ids"]) == whole
    r = client.detokenize_incremental([], GOLDEN["cut"]["ids"], end_of_stream=True)
    assert r == IncrementalText(whole, 0)


@pytest.mark.parametrize("model", MODELS)
def test_vocabulary_pages(client, model):
    by_id = {v["id"]: v for v in GOLDEN["vocabulary"]}
    for start, size in ((0, 6), (400, 5), (509, 3)):
        page = client.vocabulary(start, size, model=model)
        assert page.vocab_size == GOLDEN["vocab_size"] == 512
        assert page.next_start_id == start + size
        assert [e.id for e in page.entries] == list(range(start, start + size))
        for e in page.entries:
            want = by_id[e.id]
            assert (e.piece, e.token_bytes, e.type, e.score) == (
                want["piece"].encode("utf-8"), bytes.fromhex(want["token_bytes"]), want["type"],
                want["score"]), e
    last = client.vocabulary(510, 5, model=model)  # clipped at the end
    assert [e.id for e in last.entries] == [510, 511] and last.next_start_id == 512
    end = client.vocabulary(512, model=model)
    assert end.entries == [] and end.next_start_id == 512
    assert len(client.vocabulary(model=model).entries) == 512  # page_size 0 = 1000


def test_iter_vocabulary_walks_every_page(client):
    entries = list(client.iter_vocabulary(page_size=100))
    assert [e.id for e in entries] == list(range(512))
    assert entries == client.vocabulary(0, 10000).entries
    pieces = {e.piece: e.id for e in entries}
    assert pieces["\u2581Once".encode("utf-8")] == 403
    assert sum(e.type == "BYTE" for e in entries) == 256
    assert [e.id for e in entries if e.type == "CONTROL"] == [1, 2]


def test_models_expose_the_tokenizer(client):
    models = {m.name: m for m in client.models()}
    for name, source_end in (("stories260K", "tok512.bin (llama2.c tokenizer)"),
                             ("stories260K-hf", "stories260K-hf/tokenizer.model")):
        tok = models[name].tokenizer
        assert tok is not None and models[name].tokenizer_missing_reason == ""
        assert (tok.kind, tok.vocab_size, tok.bos_token_id, tok.eos_token_id) == (
            "sentencepiece", 512, GOLDEN["bos_token_id"], GOLDEN["eos_token_id"])
        assert tok.source.endswith(source_end), tok.source
    assert client.get_model("stories260K-hf").tokenizer == models["stories260K-hf"].tokenizer


@pytest.fixture(scope="module")
def no_tokenizer_server(start_vocabd, tmp_path_factory):
    """A vocabd serving a copy of stories260K.bin with no tok*.bin beside it,
    and --max-text-bytes 16 for the size check."""
    d = tmp_path_factory.mktemp("no-tok")
    shutil.copy(os.path.join(SOURCE_DIR, "models", "stories260K", "stories260K.bin"), d)
    return start_vocabd(["--model", f"bare={d}/stories260K.bin",
                         "--model", f"stories260K={SOURCE_DIR}/models/stories260K/stories260K.bin",
                         "--max-text-bytes", "16"])


def test_model_without_tokenizer(no_tokenizer_server):
    with VocabdClient(no_tokenizer_server.target, timeout=30) as c:
        m = c.get_model("bare")
        assert m.state == "READY" and m.tokenizer is None
        assert "tok" in m.tokenizer_missing_reason, m.tokenizer_missing_reason
        calls = [lambda: c.tokenize("Once", model="bare"),
                 lambda: c.detokenize([1, 403], model="bare"),
                 lambda: c.detokenize_incremental([1], [403], model="bare"),
                 lambda: c.vocabulary(model="bare"),
                 lambda: c.score(np.ones((1, 64), np.float32), [403], return_pieces=True,
                                 model="bare")]
        for call in calls:
            with pytest.raises(VocabdError) as e:
                call()
            assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert "'bare' has no tokenizer" in e.value.message
            assert m.tokenizer_missing_reason in e.value.message
        # Everything else, candidates included, still works.
        r = c.score(np.ones((1, 64), np.float32), [403], candidate_ids=[403], model="bare")
        assert r.rows[0].candidates[0].logprob == r.rows[0].target_logprob
        assert r.rows[0].candidates[0].piece is None


def test_text_over_max_text_bytes_is_resource_exhausted(no_tokenizer_server):
    with VocabdClient(no_tokenizer_server.target, timeout=30) as c:
        m = "stories260K"
        assert len(c.tokenize("x" * 16, add_special_tokens=False, model=m)) > 0  # at the limit
        with pytest.raises(VocabdError) as e:
            c.tokenize(["ok", "x" * 17], model=m)
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert e.value.field == "texts[1]"
        assert "17 bytes" in e.value.message and "16" in e.value.message


def test_score_candidates_equal_log_softmax(client):
    hidden = np.random.default_rng(17).standard_normal((3, 64)).astype(np.float32)
    cand = [403, 2, 0, 511, 403, 261]  # duplicates allowed, any rank
    targets = [403, 407, 261]
    res = client.score(hidden, targets, top_k=4, candidate_ids=cand)
    logprobs = client.compute_logits(hidden, log_softmax=True)
    ref = numpy_head(hidden)
    ref = ref - (np.log(np.sum(np.exp(ref - ref.max(1, keepdims=True)), 1, keepdims=True))
                 + ref.max(1, keepdims=True))
    for r, row in enumerate(res.rows):
        assert [t.token_id for t in row.candidates] == cand
        got = np.array([t.logprob for t in row.candidates], np.float32)
        # The same float32 values as the full log-softmax row.
        np.testing.assert_array_equal(got, logprobs[r, cand])
        np.testing.assert_allclose(got, ref[r, cand], atol=1e-4)
        assert got[0] == got[4]
        if targets[r] in cand:  # the target's log-prob is the same number
            assert row.candidates[cand.index(targets[r])].logprob == row.target_logprob
        for t in row.top_k:  # same row, same value wherever it is reported
            assert t.logprob == logprobs[r, t.token_id]
        assert all(t.piece is None and t.token_bytes is None for t in row.candidates + row.top_k)
        assert row.target_piece is None
    # Temperature applies to candidates too.
    hot = client.score(hidden, candidate_ids=cand, temperature=2.0)
    lp2 = client.compute_logits(hidden, log_softmax=True, temperature=2.0)
    for r, row in enumerate(hot.rows):
        np.testing.assert_array_equal([t.logprob for t in row.candidates], lp2[r, cand])


def test_score_return_pieces(client):
    hidden = np.random.default_rng(5).standard_normal((2, 64)).astype(np.float32)
    res = client.score(hidden, [403, 243], top_k=3, candidate_ids=[261, 131],
                       return_pieces=True)
    by_id = {e.id: e for e in client.vocabulary(0, 512).entries}
    for row, target in zip(res.rows, [403, 243]):
        assert (row.target_piece, row.target_token_bytes) == (by_id[target].piece,
                                                              by_id[target].token_bytes)
        for t in row.top_k + row.candidates:
            assert (t.piece, t.token_bytes) == (by_id[t.token_id].piece,
                                                by_id[t.token_id].token_bytes)
    assert res.rows[0].target_piece == "\u2581Once".encode("utf-8")
    assert res.rows[0].target_token_bytes == b" Once"
    assert res.rows[1].target_piece == b"<0xF0>" and res.rows[1].target_token_bytes == b"\xf0"
    assert [(t.piece, t.token_bytes) for t in res.rows[0].candidates] == [
        ("\u2581a".encode("utf-8"), b" a"), (b"<0x80>", b"\x80")]
    # Without targets there is no target piece.
    assert client.score(hidden, top_k=1, return_pieces=True).rows[0].target_piece is None


def test_score_stream_candidates(client):
    rng = np.random.default_rng(8)
    hs = [rng.standard_normal((n, 64)).astype(np.float32) for n in (1, 2)]
    got = list(client.score_stream([(hs[0], None), (hs[1], [403, 407])], candidate_ids=[7, 403],
                                   return_pieces=True))
    # The batcher may put the stream's two messages into one 3-row GEMM or
    # run them apart. Each row's candidates are the same floats as its
    # log-softmax row computed in one of those two compositions (where the
    # head runs oneDNN, its summation order depends on the row count).
    joint = client.compute_logits(np.vstack(hs), log_softmax=True)
    alone = [client.compute_logits(h, log_softmax=True) for h in hs]
    first_row = [0, 1]
    for i, (h, res) in enumerate(zip(hs, got)):
        for r, row in enumerate(res.rows):
            cand = np.array([t.logprob for t in row.candidates], np.float32)
            as_alone = np.array_equal(cand, alone[i][r, [7, 403]])
            as_joint = np.array_equal(cand, joint[first_row[i] + r, [7, 403]])
            assert as_alone or as_joint, (i, r, cand, alone[i][r, [7, 403]],
                                          joint[first_row[i] + r, [7, 403]])
            assert row.candidates[1].token_bytes == b" Once"
    assert got[0].rows[0].target_piece is None
    assert got[1].rows[0].target_token_bytes == b" Once"


BAD_INPUTS = [
    ("tokenize invalid UTF-8", lambda c: c.tokenize([b"ok", b"ab\xff"]),
     "texts[1]", "invalid UTF-8 at byte offset 2"),
    ("tokenize lone surrogate", lambda c: c.tokenize("a\ud800"),
     "texts[0]", "invalid UTF-8 at byte offset 1"),
    ("detokenize id = vocab_size", lambda c: c.detokenize([[1], [2, 512]]),
     "sequences[1].ids[1]", "512 is outside [0, 512)"),
    ("detokenize negative id", lambda c: c.detokenize([-1]),
     "sequences[0].ids[0]", "-1 is outside [0, 512)"),
    ("incremental previous id", lambda c: c.detokenize_incremental([1, 600], [2]),
     "sequences[0].previous_ids[1]", "600 is outside [0, 512)"),
    ("incremental new id", lambda c: c.detokenize_incremental([1], [512]),
     "sequences[0].ids[0]", "512 is outside [0, 512)"),
    ("vocabulary start_id", lambda c: c.vocabulary(513),
     "start_id", "513 is outside [0, 512]"),
    ("vocabulary negative start_id", lambda c: c.vocabulary(-1),
     "start_id", "-1 is outside [0, 512]"),
    ("vocabulary page_size", lambda c: c.vocabulary(0, 10001),
     "page_size", "10001 is outside [0, 10000]"),
    ("score candidate id", lambda c: c.score(np.ones((1, 64), np.float32), candidate_ids=[1, 512]),
     "candidate_ids[1]", "512 is outside [0, 512)"),
    ("score candidate beyond vocab_limit",
     lambda c: c.score(np.ones((1, 64), np.float32), candidate_ids=[300], vocab_limit=256),
     "candidate_ids[0]", "300 is outside [0, 256)"),
    ("score too many candidates",
     lambda c: c.score(np.ones((1, 64), np.float32), candidate_ids=[0] * 4097),
     "candidate_ids", "4097"),
]


@pytest.mark.parametrize("call,field,text", [b[1:] for b in BAD_INPUTS],
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_invalid_argument_naming_the_field(client, call, field, text):
    with pytest.raises(VocabdError) as e:
        call(client)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT, e.value
    assert e.value.field == field, e.value.message
    assert text in e.value.message, e.value.message


def test_unknown_model_is_not_found(client):
    for call in (lambda: client.tokenize("a", model="no-such-model"),
                 lambda: client.detokenize([1], model="no-such-model"),
                 lambda: client.vocabulary(model="no-such-model")):
        with pytest.raises(VocabdError) as e:
            call()
        assert e.value.code == grpc.StatusCode.NOT_FOUND and "no-such-model" in e.value.message


def test_wrong_python_types_fail_locally(client):
    with pytest.raises(TypeError, match="text must be str or bytes"):
        client.tokenize(123)
    with pytest.raises(TypeError, match=r"texts\[1\] must be str or bytes"):
        client.tokenize(["a", 5])
    with pytest.raises(TypeError, match=r"ids\[1\] must be an int"):
        client.detokenize([1, 2.5])
    with pytest.raises(TypeError, match=r"candidate_ids\[0\] must be an int"):
        client.score(np.ones((1, 64), np.float32), candidate_ids=["403"])
    with pytest.raises(TypeError, match="1-D integer array"):
        client.detokenize(np.ones(3, np.float32))
