"""vocabd.v1.Tensor <-> numpy.ndarray (little-endian, row-major; tensor.proto)."""
import numpy as np

from vocabd.v1 import tensor_pb2

# DType enum value -> little-endian numpy dtype. BF16 travels as the upper
# 16 bits of an IEEE binary32 and is decoded to float32.
_NUMPY = {
    tensor_pb2.F32: np.dtype("<f4"),
    tensor_pb2.F16: np.dtype("<f2"),
    tensor_pb2.BF16: np.dtype("<u2"),
    tensor_pb2.I32: np.dtype("<i4"),
    tensor_pb2.I64: np.dtype("<i8"),
}
_NAMES = {"f32": tensor_pb2.F32, "f16": tensor_pb2.F16, "bf16": tensor_pb2.BF16}


def dtype_enum(name):
    """"f32" | "f16" | "bf16" (or a DType enum value) -> DType enum value."""
    if isinstance(name, int):
        return name
    try:
        return _NAMES[name.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"dtype {name!r} is not one of f32, f16, bf16") from None


def float32_to_bf16_bits(a):
    """float32 array -> uint16 bf16 bits, rounded to nearest even (NaN kept NaN)."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4")
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))) >> 16
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    rounded = np.where(nan, (bits >> 16) | np.uint32(0x40), rounded)
    return rounded.astype("<u2")


def encode(array, dtype=None):
    """numpy array -> Tensor. Floats go as F32 unless dtype ("f16"/"bf16") says
    otherwise (float16 arrays as F16); integers as I64 (int32 arrays as I32)."""
    a = np.asarray(array)
    t = tensor_pb2.Tensor()
    t.shape.extend(int(d) for d in a.shape)
    if dtype is not None:
        enum = dtype_enum(dtype)
    elif a.dtype == np.float16:
        enum = tensor_pb2.F16
    elif a.dtype == np.int32:
        enum = tensor_pb2.I32
    elif np.issubdtype(a.dtype, np.integer):
        enum = tensor_pb2.I64
    elif np.issubdtype(a.dtype, np.floating):
        enum = tensor_pb2.F32
    else:
        raise TypeError(f"cannot send a tensor of numpy dtype {a.dtype}")
    t.dtype = enum
    if enum == tensor_pb2.BF16:
        t.data = float32_to_bf16_bits(a.astype(np.float32)).tobytes()
    else:
        t.data = np.ascontiguousarray(a, dtype=_NUMPY[enum]).tobytes()
    return t


def decode(t):
    """Tensor -> numpy array (BF16 widened to float32; F16 stays float16)."""
    if t.dtype not in _NUMPY:
        raise ValueError(f"tensor has dtype {tensor_pb2.DType.Name(t.dtype)}")
    np_dtype = _NUMPY[t.dtype]
    shape = tuple(t.shape)
    a = np.frombuffer(t.data, dtype=np_dtype)
    if a.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"tensor of shape {list(shape)} carries {len(t.data)} bytes")
    a = a.reshape(shape)
    if t.dtype == tensor_pb2.BF16:
        a = (a.astype("<u4") << 16).view("<f4")
    return a.astype(a.dtype.newbyteorder("="), copy=True)
