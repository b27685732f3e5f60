#include "lib/quant/ggml_types.h"

#include <cctype>
#include <string>

namespace vocabd::quant {
namespace {

// ggml.c type_traits, indexed by id (block size, bytes per block).
constexpr GgmlTypeInfo kTypes[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},          {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},      {4, nullptr, 0, 0},        {5, nullptr, 0, 0},
    {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},       {8, "q8_0", 32, 34},
    {9, "q8_1", 32, 36},      {10, "q2_K", 256, 84},     {11, "q3_K", 256, 110},
    {12, "q4_K", 256, 144},   {13, "q5_K", 256, 176},    {14, "q6_K", 256, 210},
    {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66},  {17, "iq2_xs", 256, 74},
    {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},    {20, "iq4_nl", 32, 18},
    {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},    {23, "iq4_xs", 256, 136},
    {24, "i8", 1, 1},         {25, "i16", 1, 2},         {26, "i32", 1, 4},
    {27, "i64", 1, 8},        {28, "f64", 1, 8},         {29, "iq1_m", 256, 56},
    {30, "bf16", 1, 2},
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ6_K) == 210);

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr GgmlType kAllEnumerators[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kQ4_0, GgmlType::kQ4_1,  GgmlType::kQ5_0,
    GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ8_1, GgmlType::kQ2_K,  GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K,  GgmlType::kIQ4_NL,
    GgmlType::kBF16};

}  // namespace

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  if (id >= sizeof(kTypes) / sizeof(kTypes[0])) return nullptr;
  return kTypes[id].name == nullptr ? nullptr : &kTypes[id];
}

const GgmlTypeInfo& TypeInfo(GgmlType type) { return kTypes[static_cast<uint32_t>(type)]; }

const char* GgmlTypeName(GgmlType type) { return TypeInfo(type).name; }

std::optional<GgmlType> ParseGgmlTypeName(std::string_view name) {
  const std::string want = Lower(name);
  for (GgmlType t : kAllEnumerators) {
    if (Lower(GgmlTypeName(t)) == want) return t;
  }
  return std::nullopt;
}

bool IsQuantized(GgmlType type) { return TypeInfo(type).block_size > 1; }

bool IsServedType(GgmlType type) {
  if (type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16) return true;
  for (GgmlType t : kQuantizedServedTypes) {
    if (t == type) return true;
  }
  return false;
}

int64_t RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeInfo& info = TypeInfo(type);
  if (n < 0 || n % info.block_size != 0) return -1;
  return n / info.block_size * info.type_size;
}

double BitsPerWeight(GgmlType type) {
  const GgmlTypeInfo& info = TypeInfo(type);
  return 8.0 * static_cast<double>(info.type_size) / static_cast<double>(info.block_size);
}

}  // namespace vocabd::quant
