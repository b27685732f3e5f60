// llama2.c legacy checkpoint (karpathy/llama2.c run.c, "version 0"):
//
//   int32 header[7] = {dim, hidden_dim, n_layers, n_heads, n_kv_heads,
//                      vocab_size (negative = untied classifier follows),
//                      seq_len}
//   float32 arrays: token_embedding[vocab, dim], rms_att[L, dim],
//     wq[L, dim, dim], wk[L, kv_dim, dim], wv[L, kv_dim, dim],
//     wo[L, dim, dim], rms_ffn[L, dim], w1[L, hidden, dim],
//     w2[L, dim, hidden], w3[L, hidden, dim], rms_final[dim],
//     freq_cis_real[seq_len, head_size/2], freq_cis_imag[...],
//     (wcls[vocab, dim] when vocab_size < 0)
//
// RoPE: INTERLEAVED pairs, theta 10000; RMSNorm eps 1e-5; tied head unless
// vocab_size < 0.
#ifndef VOCABD_LIB_CHECKPOINT_LLAMA2C_H_
#define VOCABD_LIB_CHECKPOINT_LLAMA2C_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"

namespace vocabd {

// Memory-maps `path` and exposes its arrays under the canonical names of
// checkpoint.h. INVALID_ARGUMENT naming the file for a short file, a
// non-positive dimension, heads not dividing dim, or a size that disagrees
// with the header.
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadLlama2c(const std::string& path);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_LLAMA2C_H_
