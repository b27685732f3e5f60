#include "lib/lm_head.h"

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace vocabd {
namespace {

using dnnl::memory;

// A per-thread, growable, 64-byte-aligned scratchpad buffer. oneDNN's user
// scratchpad must not be shared by concurrent executions; one buffer per
// thread satisfies that because Compute is synchronous.
class ScratchBuffer {
 public:
  ~ScratchBuffer() { std::free(data_); }
  // nullptr on allocation failure.
  void* Get(size_t size) {
    if (size <= capacity_) return data_;
    const size_t rounded = (size + kAlign - 1) / kAlign * kAlign;
    void* fresh = std::aligned_alloc(kAlign, rounded);
    if (fresh == nullptr) return nullptr;
    std::free(data_);
    data_ = fresh;
    capacity_ = rounded;
    return data_;
  }

 private:
  static constexpr size_t kAlign = 64;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

ScratchBuffer& ThreadScratch() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

absl::Status DnnlError(const char* what, const dnnl::error& e) {
  return absl::InternalError(
      absl::StrCat("oneDNN ", what, " failed: ", e.what(), " (dnnl_status ",
                   static_cast<int>(e.status), ")"));
}

}  // namespace

struct LmHead::Impl {
  Options options;
  dnnl::engine engine;
  memory::desc weights_md;
  memory::desc scratchpad_md;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
};

LmHead::LmHead(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LmHead::~LmHead() = default;

int64_t LmHead::vocab_size() const { return impl_->options.vocab_size; }
int64_t LmHead::hidden_size() const { return impl_->options.hidden_size; }
std::string LmHead::implementation() const {
  const char* name = impl_->pd.impl_info_str();
  return name == nullptr ? "" : name;
}

absl::StatusOr<std::unique_ptr<LmHead>> LmHead::Create(const Options& options) {
  if (options.weights == nullptr) {
    return absl::InvalidArgumentError("LmHead: weights is null");
  }
  if (options.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: vocab_size = ", options.vocab_size, " must be > 0"));
  }
  if (options.hidden_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: hidden_size = ", options.hidden_size, " must be > 0"));
  }
  const memory::dim k = options.hidden_size;
  const memory::dim n = options.vocab_size;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    impl->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    const memory::desc src_md({DNNL_RUNTIME_DIM_VAL, k}, memory::data_type::f32,
                              memory::format_tag::ab);
    // W is [N, K] row-major; as the [K, N] weights operand element (k, n)
    // sits at k * 1 + n * K: strides {1, K}.
    impl->weights_md = memory::desc({k, n}, memory::data_type::f32, memory::dims{1, k});
    const memory::desc dst_md({DNNL_RUNTIME_DIM_VAL, n}, memory::data_type::f32,
                              memory::format_tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::desc desc(src_md, impl->weights_md, dst_md);
    impl->pd = dnnl::matmul::primitive_desc(desc, attr, impl->engine);
    impl->scratchpad_md = impl->pd.scratchpad_desc();
    impl->matmul = dnnl::matmul(impl->pd);
  } catch (const dnnl::error& e) {
    return DnnlError("matmul primitive creation", e);
  }
  return std::unique_ptr<LmHead>(new LmHead(std::move(impl)));
}

absl::Status LmHead::Compute(const float* hidden, int64_t rows, float* logits) const {
  if (rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("LmHead: rows = ", rows, " must be >= 0"));
  }
  if (rows == 0) return absl::OkStatus();
  if (hidden == nullptr || logits == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: ", hidden == nullptr ? "hidden" : "logits",
                     " is null with rows = ", rows));
  }
  const Impl& impl = *impl_;
  const memory::dim m = rows;
  try {
    const memory::desc src_md({m, impl.options.hidden_size}, memory::data_type::f32,
                              memory::format_tag::ab);
    const memory::desc dst_md({m, impl.options.vocab_size}, memory::data_type::f32,
                              memory::format_tag::ab);
    // oneDNN takes non-const handles; it never writes SRC or WEIGHTS.
    memory src_mem(src_md, impl.engine, const_cast<float*>(hidden));
    memory wei_mem(impl.weights_md, impl.engine, const_cast<float*>(impl.options.weights));
    memory dst_mem(dst_md, impl.engine, logits);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    const size_t scratch_size = impl.scratchpad_md.get_size();
    if (scratch_size > 0) {
      void* scratch = ThreadScratch().Get(scratch_size);
      if (scratch == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("LmHead: cannot allocate ", scratch_size, " scratchpad bytes"));
      }
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(impl.scratchpad_md, impl.engine, scratch));
    }
    dnnl::stream stream(impl.engine);
    impl.matmul.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return DnnlError(absl::StrCat("matmul execution (rows = ", rows, ")").c_str(), e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("LmHead: out of memory (rows = ", rows, ")"));
  }
  return absl::OkStatus();
}

}  // namespace vocabd
