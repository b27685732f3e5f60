#include "lib/checkpoint/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

void Put(std::string* out, const void* p, size_t n) { out->append(static_cast<const char*>(p), n); }
template <typename T>
void PutScalar(std::string* out, T v) {
  Put(out, &v, sizeof(T));
}
void PutString(std::string* out, const std::string& s) {
  PutScalar<uint64_t>(out, s.size());
  out->append(s);
}

}  // namespace

absl::Status WriteGguf(const std::string& path,
                       const std::vector<std::pair<std::string, GgufWriteValue>>& metadata,
                       const std::vector<GgufWriteTensor>& tensors, uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF alignment ", alignment,
                                                   " is not a power of two"));
  }
  std::vector<uint64_t> offsets;
  uint64_t data_size = 0;
  for (const GgufWriteTensor& t : tensors) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < t.shape.size(); ++i) rows *= t.shape[i];
    const int64_t row_bytes = t.shape.empty() ? -1 : quant::RowBytes(t.type, t.shape.back());
    if (row_bytes < 0 || static_cast<uint64_t>(rows * row_bytes) != t.nbytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", t.name, "\" of type ", quant::GgmlTypeName(t.type), " holds ", t.nbytes,
          " bytes, which its shape does not give"));
    }
    data_size = (data_size + alignment - 1) / alignment * alignment;
    offsets.push_back(data_size);
    data_size += t.nbytes;
  }
  std::string header = "GGUF";
  PutScalar<uint32_t>(&header, 3);
  PutScalar<uint64_t>(&header, tensors.size());
  const bool write_alignment = alignment != 32;
  PutScalar<uint64_t>(&header, metadata.size() + (write_alignment ? 1 : 0));
  auto put_kv = [&header](const std::string& key, const GgufWriteValue& v) {
    PutString(&header, key);
    if (const auto* u = std::get_if<uint32_t>(&v)) {
      PutScalar<uint32_t>(&header, 4);
      PutScalar<uint32_t>(&header, *u);
    } else if (const auto* f = std::get_if<float>(&v)) {
      PutScalar<uint32_t>(&header, 6);
      PutScalar<float>(&header, *f);
    } else {
      PutScalar<uint32_t>(&header, 8);
      PutString(&header, std::get<std::string>(v));
    }
  };
  if (write_alignment) put_kv("general.alignment", alignment);
  for (const auto& [key, value] : metadata) put_kv(key, value);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufWriteTensor& t = tensors[i];
    PutString(&header, t.name);
    PutScalar<uint32_t>(&header, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
      PutScalar<uint64_t>(&header, static_cast<uint64_t>(*it));
    }
    PutScalar<uint32_t>(&header, static_cast<uint32_t>(t.type));
    PutScalar<uint64_t>(&header, offsets[i]);
  }
  header.resize((header.size() + alignment - 1) / alignment * alignment, '\0');

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  uint64_t pos = 0;
  static const char kZeros[64] = {};
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    while (ok && pos < offsets[i]) {
      const size_t pad = static_cast<size_t>(std::min<uint64_t>(sizeof(kZeros), offsets[i] - pos));
      ok = std::fwrite(kZeros, 1, pad, f) == pad;
      pos += pad;
    }
    ok = ok && std::fwrite(tensors[i].data, 1, tensors[i].nbytes, f) == tensors[i].nbytes;
    pos += tensors[i].nbytes;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return absl::InternalError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

}  // namespace vocabd
