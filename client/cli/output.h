// vocabctl output helpers shared by the subcommands: JSON documents
// (indented or one line), aligned text tables, number and byte formatting,
// tensor shapes, proto messages as JSON, and [rows, cols] matrices (decode,
// print the first rows/values, JSON). Non-finite floats print as JSON null.
#ifndef VOCABD_CLIENT_CLI_OUTPUT_H_
#define VOCABD_CLIENT_CLI_OUTPUT_H_

#include <google/protobuf/message.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "vocabd/v1/rope.pb.h"
#include "vocabd/v1/tensor.pb.h"

namespace vocabd::cli {

using json = nlohmann::ordered_json;  // keeps field order in output

// Small documents print indented; documents carrying tensor data print on
// one line (pipe through `jq` to pretty-print).
void PrintJson(const json& j);
void PrintJsonCompact(const json& j);

// Rows of cells, each column padded to its widest cell (DisplayWidth) plus
// two spaces.
void PrintTable(const std::vector<std::vector<std::string>>& rows);
// Terminal columns a UTF-8 string takes: 2 per East Asian Wide/Fullwidth
// code point, 0 per combining mark (Mn, Me) or format character (Cf), 1 per
// other code point and per ill-formed subsequence (shown as one U+FFFD;
// ICU's U8_NEXT decides where one ends). ICU's UCHAR_EAST_ASIAN_WIDTH and
// general category: UAX #11's rule, as wcwidth applies it.
size_t DisplayWidth(std::string_view text);

// "%.6g".
std::string Num(double v);
// Fixed-width value for columns of numbers ("%10.5f").
std::string Cell(double v);
// " <Cell> <Cell> ...": the first `show` values of row[0, width), then " ..."
// when show < width.
std::string CellRow(const float* row, int64_t show, int64_t width);
// "512 B", "1015.8 KiB", ...
std::string HumanBytes(int64_t bytes);

// [3, 64] (the text form is lib/core/shape.h ShapeString(t.shape())).
json ShapeJson(const v1::Tensor& t);

// "interleaved", "half-split" or "-".
std::string PairLayoutName(v1::RopePairLayout p);

// Proto message -> JSON value with proto field names. Unlike the canonical
// proto3 JSON mapping, 64-bit integers are JSON numbers (ids, sizes and
// counts here are far below 2^53). Scalars without presence always print;
// unset sub-messages and unset `optional` scalars are omitted; enums print
// their names; bytes fields print as "<n> bytes" (no Tensor is
// printed this way).
json ProtoJson(const google::protobuf::Message& message);

// Token bytes (may be partial UTF-8) as printable text: well-formed UTF-8
// kept, \n \t \r and \\ escaped, other control bytes and ill-formed bytes
// as \xNN. Valid UTF-8 (safe in JSON).
std::string TokenText(const std::string& bytes);
// TokenText in double quotes ("\" Once\"" -> "\" Once\"").
std::string Quoted(const std::string& bytes);

// [rows, cols] F32 tensor -> values, checking the shape.
absl::StatusOr<std::vector<float>> DecodeMatrix(const v1::Tensor& t, const char* name,
                                                int64_t* rows, int64_t* cols);

// Prints the first `show_rows` x `show_cols` values of a [rows, cols] matrix,
// one line per row labelled "pos <first_label + row>".
void PrintMatrix(const std::string& title, const std::vector<float>& values, int64_t rows,
                 int64_t cols, int64_t first_label, int64_t show_rows, int64_t show_cols);

// [[row]...] of the row-major [rows, cols] matrix at `values`.
json MatrixJson(const float* values, int64_t rows, int64_t cols);

}  // namespace vocabd::cli

#endif  // VOCABD_CLIENT_CLI_OUTPUT_H_
