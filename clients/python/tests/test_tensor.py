"""vocabd._tensor: numpy <-> vocabd.v1.Tensor (tensor.proto), no server."""
import numpy as np
import pytest

from vocabd import _tensor
from vocabd.v1 import tensor_pb2


def test_f32_roundtrip_is_little_endian_row_major():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = _tensor.encode(a)
    assert (t.dtype, list(t.shape)) == (tensor_pb2.F32, [2, 3])
    assert t.data == np.arange(6, dtype="<f4").tobytes()
    np.testing.assert_array_equal(_tensor.decode(t), a)


def test_integer_and_f16_dtypes():
    assert _tensor.encode(np.array([1, 2], np.int32)).dtype == tensor_pb2.I32
    assert _tensor.encode([[1, 2]]).dtype == tensor_pb2.I64
    h = np.array([0.5, -2.0], np.float16)
    t = _tensor.encode(h)
    assert t.dtype == tensor_pb2.F16 and t.data == h.astype("<f2").tobytes()
    assert _tensor.decode(t).dtype == np.float16


def test_bf16_rounds_to_nearest_even():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.0, np.nan], np.float32)
    bits = _tensor.float32_to_bf16_bits(x)
    assert list(bits[:4]) == [0x3F80, 0x3F80, 0x3F82, 0xC000]
    assert np.isnan(_tensor.decode(_tensor.encode(x, "bf16"))[4])
    back = _tensor.decode(_tensor.encode(x[:4], "bf16"))
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, [1.0, 1.0, 1.015625, -2.0])


def test_bad_tensors_are_refused():
    t = tensor_pb2.Tensor(dtype=tensor_pb2.F32, shape=[2, 2], data=b"\0" * 12)
    with pytest.raises(ValueError, match=r"shape \[2, 2\] carries 12 bytes"):
        _tensor.decode(t)
    with pytest.raises(ValueError, match="DTYPE_UNSPECIFIED"):
        _tensor.decode(tensor_pb2.Tensor(shape=[1], data=b"\0" * 4))
    with pytest.raises(ValueError, match="not one of f32, f16, bf16"):
        _tensor.dtype_enum("f64")
    with pytest.raises(TypeError):
        _tensor.encode(np.array(["a"]))
