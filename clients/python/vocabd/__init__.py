"""Python client for vocabd: token embeddings, LM-head scoring, RoPE and the
model's tokenizer over gRPC.

    from vocabd import VocabdClient
    with VocabdClient("127.0.0.1:50051") as c:
        x = c.embed([1, 403, 407])                 # numpy float32 [3, hidden_size]
        s = c.score(x, targets=[403, 407, 261], top_k=5)
        ids = c.tokenize("Once upon a time")       # [1, 403, 407, 261, 378]
        text = c.detokenize(ids, skip_special_tokens=True)

The generated stubs live in vocabd.v1 (built from proto/ by gen_stubs.py).
"""
from vocabd.client import (DEFAULT_SERVICE_CONFIG, IncrementalDecoder, IncrementalText, Model, RowScore, ScoreResult,
                           Tls, Tokenized, TokenizerInfo, TopToken, VocabdClient, VocabEntry,
                           VocabularyPage)
from vocabd.errors import VocabdError

__all__ = ["VocabdClient", "VocabdError", "DEFAULT_SERVICE_CONFIG", "Tls", "Model", "RowScore", "ScoreResult", "TopToken",
           "TokenizerInfo", "Tokenized", "IncrementalText", "IncrementalDecoder", "VocabEntry",
           "VocabularyPage"]
__version__ = "0.1.0"
