"""Python client for vocabd: token embeddings, LM-head scoring and RoPE over gRPC.

    from vocabd import VocabdClient
    with VocabdClient("127.0.0.1:50051") as c:
        x = c.embed([1, 403, 407])                 # numpy float32 [3, hidden_size]
        s = c.score(x, targets=[403, 407, 261], top_k=5)

The generated stubs live in vocabd.v1 (built from proto/ by gen_stubs.py).
"""
from vocabd.client import Model, RowScore, ScoreResult, Tls, TopToken, VocabdClient
from vocabd.errors import VocabdError

__all__ = ["VocabdClient", "VocabdError", "Tls", "Model", "RowScore", "ScoreResult", "TopToken"]
__version__ = "0.1.0"
