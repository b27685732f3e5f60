#include "lib/checkpoint/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vocabd {
namespace {

// Minimum encoded size of one metadata kv (empty key + type + u8 value)
// and one tensor info (empty name + n_dims + 1 dim + type + offset).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

uint64_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16: return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32: return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64: return 8;
    case GgufValueType::kString: return 8;  // minimum: the length
    case GgufValueType::kArray: return 12;  // minimum: type + count
  }
  return 0;
}

bool KnownValueType(uint32_t t) { return t <= 12; }

class GgufReader {
 public:
  GgufReader(const uint8_t* data, size_t size, const std::string& file)
      : data_(data), size_(size), file_(file) {}

  absl::Status Error(const std::string& rule) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": invalid GGUF file: ", rule));
  }
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <typename T>
  absl::Status Read(const std::string& what, T* out) {
    if (remaining() < sizeof(T)) {
      return Error(absl::StrCat(what, " at offset ", pos_, " runs past the end of the file (",
                                size_, " bytes)"));
    }
    std::memcpy(out, data_ + pos_, sizeof(T));  // little-endian host (x86-64)
    pos_ += sizeof(T);
    return absl::OkStatus();
  }

  absl::Status ReadString(const std::string& what, std::string* out) {
    uint64_t len = 0;
    if (absl::Status s = Read(absl::StrCat(what, " length"), &len); !s.ok()) return s;
    if (len > remaining()) {
      return Error(absl::StrCat(what, " length ", len, " at offset ", pos_ - 8,
                                " is larger than the ", remaining(), " bytes left in the file"));
    }
    if (len > kMaxGgufStringBytes) {
      return Error(absl::StrCat(what, " length ", len, " exceeds the limit of ",
                                kMaxGgufStringBytes, " bytes"));
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status Skip(uint64_t n) {
    if (n > remaining()) return Error("internal: skip past the end");
    pos_ += n;
    return absl::OkStatus();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& file_;
  uint64_t pos_ = 0;
};

// An integer of type T into both views of v (i: as signed, u: as unsigned).
template <typename T>
absl::Status ReadInteger(GgufReader& r, const std::string& what, GgufValue* v) {
  T x{};
  if (auto s = r.Read(what, &x); !s.ok()) return s;
  v->i = static_cast<int64_t>(x);
  v->u = static_cast<uint64_t>(x);
  return absl::OkStatus();
}

absl::Status ReadScalar(GgufReader& r, GgufValueType type, const std::string& what, GgufValue* v) {
  v->type = type;
  switch (type) {
    case GgufValueType::kU8: return ReadInteger<uint8_t>(r, what, v);
    case GgufValueType::kI8: return ReadInteger<int8_t>(r, what, v);
    case GgufValueType::kU16: return ReadInteger<uint16_t>(r, what, v);
    case GgufValueType::kI16: return ReadInteger<int16_t>(r, what, v);
    case GgufValueType::kU32: return ReadInteger<uint32_t>(r, what, v);
    case GgufValueType::kI32: return ReadInteger<int32_t>(r, what, v);
    case GgufValueType::kU64: return ReadInteger<uint64_t>(r, what, v);
    case GgufValueType::kI64: return ReadInteger<int64_t>(r, what, v);
    case GgufValueType::kBool: {
      uint8_t x = 0;
      if (auto s = r.Read(what, &x); !s.ok()) return s;
      if (x > 1) return r.Error(absl::StrCat(what, " is a bool with byte value ", x, " (not 0/1)"));
      v->i = x; v->u = x;
      break;
    }
    case GgufValueType::kF32: { float x = 0; if (auto s = r.Read(what, &x); !s.ok()) return s; v->f = x; break; }
    case GgufValueType::kF64: { double x = 0; if (auto s = r.Read(what, &x); !s.ok()) return s; v->f = x; break; }
    case GgufValueType::kString: return r.ReadString(what, &v->s);
    case GgufValueType::kArray: return r.Error(absl::StrCat(what, ": internal: array as scalar"));
  }
  return absl::OkStatus();
}

absl::Status ReadValue(GgufReader& r, uint32_t raw_type, const std::string& key, GgufValue* v) {
  if (!KnownValueType(raw_type)) {
    return r.Error(absl::StrCat("metadata key \"", key, "\" has unknown value type ", raw_type,
                                " (known: 0..12)"));
  }
  const auto type = static_cast<GgufValueType>(raw_type);
  if (type != GgufValueType::kArray) {
    return ReadScalar(r, type, absl::StrCat("metadata \"", key, "\" value"), v);
  }
  v->type = GgufValueType::kArray;
  uint32_t elem_type = 0;
  if (auto s = r.Read(absl::StrCat("metadata \"", key, "\" array type"), &elem_type); !s.ok()) {
    return s;
  }
  if (!KnownValueType(elem_type) || elem_type == static_cast<uint32_t>(GgufValueType::kArray)) {
    return r.Error(absl::StrCat("metadata key \"", key, "\" is an array of unknown or nested type ",
                                elem_type));
  }
  uint64_t count = 0;
  if (auto s = r.Read(absl::StrCat("metadata \"", key, "\" array count"), &count); !s.ok()) {
    return s;
  }
  const auto et = static_cast<GgufValueType>(elem_type);
  const uint64_t min_elem = ScalarSize(et);
  if (count > r.remaining() / min_elem) {
    return r.Error(absl::StrCat("metadata key \"", key, "\" array count ", count, " x ", min_elem,
                                " bytes is larger than the ", r.remaining(),
                                " bytes left in the file"));
  }
  v->array_type = et;
  v->array_count = count;
  const bool keep = count <= kMaxGgufKeptArrayCount;
  if (keep) {
    if (et == GgufValueType::kString) {
      v->array_s.reserve(count);
    } else if (et == GgufValueType::kF32 || et == GgufValueType::kF64) {
      v->array_f.reserve(count);
    } else {
      v->array_i.reserve(count);
    }
  }
  for (uint64_t n = 0; n < count; ++n) {
    GgufValue e;
    if (auto s = ReadScalar(r, et, absl::StrCat("metadata \"", key, "\"[", n, "]"), &e); !s.ok()) {
      return s;
    }
    if (keep) {
      if (et == GgufValueType::kString) {
        v->array_s.push_back(std::move(e.s));
      } else if (e.is_float()) {
        v->array_f.push_back(e.f);
      } else {
        v->array_i.push_back(e.i);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kU8: case GgufValueType::kI8: case GgufValueType::kU16:
    case GgufValueType::kI16: case GgufValueType::kU32: case GgufValueType::kI32:
    case GgufValueType::kU64: case GgufValueType::kI64: case GgufValueType::kBool:
      return true;
    default:
      return false;
  }
}

std::vector<int64_t> GgufTensorInfo::shape() const {
  std::vector<int64_t> out(ne.rbegin(), ne.rend());
  return out;
}

int64_t GgufTensorInfo::num_elements() const {
  int64_t n = 1;
  for (uint64_t d : ne) n *= static_cast<int64_t>(d);
  return n;
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

absl::StatusOr<GgufFile> ParseGguf(const uint8_t* data, size_t size, const std::string& file_name) {
  GgufReader r(data, size, file_name);
  GgufFile out;
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0) {
    std::string got;
    for (size_t i = 0; i < std::min<size_t>(size, 4); ++i) {
      absl::StrAppend(&got, i ? " " : "", "0x", absl::Hex(data[i], absl::kZeroPad2));
    }
    return r.Error(absl::StrCat("bad magic [", got, "] (expected \"GGUF\" = 0x47 0x47 0x55 0x46)"));
  }
  if (auto s = r.Skip(4); !s.ok()) return s;
  if (auto s = r.Read("version", &out.version); !s.ok()) return s;
  if (out.version == 1) {
    return r.Error(
        "version 1 (legacy GGUF with 32-bit counts and string lengths) is not supported; "
        "supported versions are 2 and 3 (re-convert the model with a current llama.cpp)");
  }
  if (out.version != 2 && out.version != 3) {
    return r.Error(absl::StrCat("unknown version ", out.version,
                                " (supported: 2, 3; a big-endian file also shows up here)"));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  if (auto s = r.Read("tensor_count", &tensor_count); !s.ok()) return s;
  if (auto s = r.Read("metadata_kv_count", &kv_count); !s.ok()) return s;
  if (kv_count > r.remaining() / kMinKvBytes) {
    return r.Error(absl::StrCat("metadata_kv_count ", kv_count, " is larger than the ",
                                r.remaining(), " bytes left in the file can hold"));
  }
  if (tensor_count > r.remaining() / kMinTensorInfoBytes) {
    return r.Error(absl::StrCat("tensor_count ", tensor_count, " is larger than the ",
                                r.remaining(), " bytes left in the file can hold"));
  }
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key;
    if (auto s = r.ReadString(absl::StrCat("metadata key #", k), &key); !s.ok()) return s;
    uint32_t type = 0;
    if (auto s = r.Read(absl::StrCat("metadata \"", key, "\" type"), &type); !s.ok()) return s;
    GgufValue value;
    if (auto s = ReadValue(r, type, key, &value); !s.ok()) return s;
    if (!out.metadata.emplace(key, std::move(value)).second) {
      return r.Error(absl::StrCat("duplicate metadata key \"", key, "\""));
    }
  }
  if (const GgufValue* a = out.Find("general.alignment"); a != nullptr) {
    if (a->type != GgufValueType::kU32) {
      return r.Error("general.alignment must be a u32");
    }
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      return r.Error(absl::StrCat("general.alignment = ", a->u, " is not a power of two"));
    }
    out.alignment = static_cast<uint32_t>(a->u);
  }
  std::set<std::string> names;
  out.tensors.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensorInfo info;
    if (auto s = r.ReadString(absl::StrCat("tensor #", t, " name"), &info.name); !s.ok()) return s;
    const std::string where = absl::StrCat("tensor \"", info.name, "\"");
    if (!names.insert(info.name).second) return r.Error(absl::StrCat("duplicate ", where));
    uint32_t n_dims = 0;
    if (auto s = r.Read(where + " n_dims", &n_dims); !s.ok()) return s;
    if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxGgufDims)) {
      return r.Error(absl::StrCat(where, " n_dims = ", n_dims, " is outside [1, ", kMaxGgufDims,
                                  "]"));
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t n = 0;
      if (auto s = r.Read(absl::StrCat(where, " ne[", d, "]"), &n); !s.ok()) return s;
      if (n == 0) return r.Error(absl::StrCat(where, " ne[", d, "] = 0 (dims must be >= 1)"));
      if (__builtin_mul_overflow(elements, n, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return r.Error(absl::StrCat(where, " dims overflow int64 at ne[", d, "] = ", n));
      }
      info.ne.push_back(n);
    }
    if (auto s = r.Read(where + " type", &info.type); !s.ok()) return s;
    const quant::GgmlTypeInfo* type = quant::FindGgmlType(info.type);
    if (type == nullptr) {
      return r.Error(absl::StrCat(where, " has unknown ggml type id ", info.type,
                                  " (known ggml types: ids 0..3, 6..30)"));
    }
    const uint64_t block_size = static_cast<uint64_t>(type->block_size);
    if (info.ne[0] % block_size != 0 && elements % block_size == 0) {
      // Whole blocks in total, but not per row: blocks would straddle rows.
      const uint64_t rows = elements / info.ne[0];
      return r.Error(absl::StrCat(where, " of type ", type->name, ": its ", elements / block_size,
                                  " blocks of ", block_size, " elements do not divide into its ",
                                  rows, " rows of ne[0] = ", info.ne[0],
                                  " elements (each row must hold whole blocks)"));
    }
    if (info.ne[0] % block_size != 0) {
      return r.Error(absl::StrCat(where, " of type ", type->name, " has a row length ne[0] = ",
                                  info.ne[0], " that is not a multiple of the ", type->name,
                                  " block size ", block_size));
    }
    const uint64_t blocks = elements / static_cast<uint64_t>(type->block_size);
    if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(type->type_size), &info.nbytes)) {
      return r.Error(absl::StrCat(where, " byte size overflows uint64"));
    }
    if (auto s = r.Read(where + " offset", &info.offset); !s.ok()) return s;
    if (info.offset % out.alignment != 0) {
      return r.Error(absl::StrCat(where, " offset ", info.offset,
                                  " is not a multiple of the alignment ", out.alignment));
    }
    out.tensors.push_back(std::move(info));
  }
  // Data section starts at the next multiple of the alignment.
  const uint64_t pos = r.pos();
  const uint64_t pad = (out.alignment - pos % out.alignment) % out.alignment;
  out.data_start = pos + pad;
  if (out.data_start > size && !out.tensors.empty()) {
    return r.Error(absl::StrCat("the data section would start at ", out.data_start,
                                ", past the end of the file (", size, " bytes)"));
  }
  const uint64_t data_bytes = size >= out.data_start ? size - out.data_start : 0;
  std::vector<const GgufTensorInfo*> sorted;
  for (GgufTensorInfo& t : out.tensors) {
    if (t.offset > data_bytes) {
      return r.Error(absl::StrCat("tensor \"", t.name, "\" [offset ", t.offset, ", +", t.nbytes,
                                  " bytes) is out of bounds: the data section holds ",
                                  data_bytes, " bytes"));
    }
    if (t.nbytes > data_bytes - t.offset) {
      const quant::GgmlTypeInfo* type = quant::FindGgmlType(t.type);
      return r.Error(absl::StrCat(
          "tensor \"", t.name, "\" [offset ", t.offset, ", +", t.nbytes,
          " bytes) is out of bounds (truncated data): its ", type->name, " data (",
          t.num_elements() / type->block_size, " blocks of ", type->type_size,
          " bytes) needs ", t.nbytes, " bytes but the data section holds ",
          data_bytes - t.offset, " from its offset"));
    }
    t.offset += out.data_start;
    sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const GgufTensorInfo& prev = *sorted[i - 1];
    if (sorted[i]->offset < prev.offset + prev.nbytes) {
      return r.Error(absl::StrCat("tensor \"", sorted[i]->name, "\" at data offset ",
                                  sorted[i]->offset - out.data_start, " overlaps tensor \"",
                                  prev.name, "\" which ends at ",
                                  prev.offset + prev.nbytes - out.data_start));
    }
  }
  return out;
}

}  // namespace vocabd
