"""The default service config (DEFAULT_SERVICE_CONFIG) retries UNAVAILABLE and
CANCELLED on the RPCs that are safe to retry and never LoadModel /
UnloadModel; it is the same policy vocabctl uses (client/vocabd_client.h
kDefaultServiceConfig).

A fake ModelService / EmbeddingService on 127.0.0.1 answers the first
`fail_first` attempts of each method with `code` (UNAVAILABLE) and counts
attempts.
"""
import json
import os
import re
import threading
from concurrent import futures

import grpc
import pytest

from conftest import SOURCE_DIR


class _Flaky:
    def __init__(self, fail_first, code=grpc.StatusCode.UNAVAILABLE):
        self.fail_first = fail_first
        self.code = code
        self.attempts = {}
        self.lock = threading.Lock()

    def attempt(self, method, context):
        with self.lock:
            n = self.attempts.get(method, 0) + 1
            self.attempts[method] = n
        if n <= self.fail_first:
            context.abort(self.code, f"{method}: attempt {n} refused")


def _serve(flaky):
    from vocabd.v1 import embedding_pb2, embedding_pb2_grpc, model_pb2, model_pb2_grpc, tensor_pb2

    class Models(model_pb2_grpc.ModelServiceServicer):
        def GetModel(self, request, context):
            flaky.attempt("GetModel", context)
            return model_pb2.ModelInfo(name=request.name)

        def LoadModel(self, request, context):
            flaky.attempt("LoadModel", context)
            return model_pb2.ModelInfo(name=request.name)

        def UnloadModel(self, request, context):
            flaky.attempt("UnloadModel", context)
            return model_pb2.UnloadModelResponse()

    class Embedding(embedding_pb2_grpc.EmbeddingServiceServicer):
        def Embed(self, request, context):
            flaky.attempt("Embed", context)
            return embedding_pb2.EmbedResponse(embeddings=tensor_pb2.Tensor(
                dtype=tensor_pb2.F32, shape=[len(request.sequences[0].token_ids), 1],
                data=b"\0\0\0\0" * len(request.sequences[0].token_ids)))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    model_pb2_grpc.add_ModelServiceServicer_to_server(Models(), server)
    embedding_pb2_grpc.add_EmbeddingServiceServicer_to_server(Embedding(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture()
def flaky_server():
    flaky = _Flaky(fail_first=2)
    server, target = _serve(flaky)
    yield flaky, target
    server.stop(None)


def test_default_policy_equals_vocabctls():
    import vocabd
    with open(os.path.join(SOURCE_DIR, "client", "vocabd_client.h")) as f:
        header = f.read()
    cpp = re.search(r'kDefaultServiceConfig\[\] = R"json\((.*?)\)json"', header, re.S).group(1)
    assert json.loads(vocabd.DEFAULT_SERVICE_CONFIG) == json.loads(cpp)
    policy = json.loads(cpp)["methodConfig"][0]["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE", "CANCELLED"]
    assert policy["maxAttempts"] == 5


def test_idempotent_rpcs_are_retried_on_unavailable(flaky_server):
    from vocabd import VocabdClient
    flaky, target = flaky_server
    with VocabdClient(target, timeout=10) as c:
        assert c.get_model("m").name == "m"
        assert c.embed([1, 2]).shape == (2, 1)
    assert flaky.attempts == {"GetModel": 3, "Embed": 3}


def test_idempotent_rpcs_are_retried_when_the_server_cancels():
    # What a draining server's transport answers a call it received but had
    # not started (tests/deploy/fleet_test.py sees it on SIGTERM).
    from vocabd import VocabdClient
    flaky = _Flaky(fail_first=2, code=grpc.StatusCode.CANCELLED)
    server, target = _serve(flaky)
    try:
        with VocabdClient(target, timeout=10) as c:
            assert c.embed([1, 2]).shape == (2, 1)
            assert c.get_model("m").name == "m"
    finally:
        server.stop(None)
    assert flaky.attempts == {"Embed": 3, "GetModel": 3}


def test_load_and_unload_are_never_retried(flaky_server):
    from vocabd import VocabdClient, VocabdError
    flaky, target = flaky_server
    with VocabdClient(target, timeout=10) as c:
        for call in (c.load_model, c.unload_model):
            with pytest.raises(VocabdError) as e:
                call("m")
            assert e.value.code == grpc.StatusCode.UNAVAILABLE
            assert "attempt 1 refused" in str(e.value)
    assert flaky.attempts == {"LoadModel": 1, "UnloadModel": 1}


def test_service_config_none_sends_once(flaky_server):
    from vocabd import VocabdClient, VocabdError
    flaky, target = flaky_server
    with VocabdClient(target, timeout=10, service_config=None) as c:
        with pytest.raises(VocabdError):
            c.get_model("m")
    assert flaky.attempts == {"GetModel": 1}


def test_lb_policy_is_checked():
    from vocabd import VocabdClient
    with pytest.raises(ValueError, match="lb_policy"):
        VocabdClient("127.0.0.1:1", lb_policy="least_request")
    VocabdClient("ipv4:127.0.0.1:1,127.0.0.2:1", lb_policy="round_robin").close()
