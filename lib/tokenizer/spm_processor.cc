// No Abseil header may be included here (see spm_processor.h).
#include "lib/tokenizer/spm_processor.h"

#include <sentencepiece_processor.h>

namespace vocabd {
namespace tokenizer_internal {

struct SpmProcessor::Impl {
  sentencepiece::SentencePieceProcessor spp;
};

SpmProcessor::SpmProcessor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SpmProcessor::~SpmProcessor() = default;

std::unique_ptr<SpmProcessor> SpmProcessor::Load(std::string_view serialized, std::string* error) {
  auto impl = std::make_unique<Impl>();
  const auto s = impl->spp.LoadFromSerializedProto(serialized);
  if (!s.ok()) {
    *error = s.ToString();
    return nullptr;
  }
  return std::unique_ptr<SpmProcessor>(new SpmProcessor(std::move(impl)));
}

bool SpmProcessor::Encode(std::string_view text, std::vector<int32_t>* ids,
                          std::vector<std::pair<int64_t, int64_t>>* offsets, int64_t base,
                          std::string* error) const {
  if (offsets == nullptr) {
    std::vector<int> out;
    const auto s = impl_->spp.Encode(text, &out);
    if (!s.ok()) {
      *error = s.ToString();
      return false;
    }
    ids->insert(ids->end(), out.begin(), out.end());
    return true;
  }
  sentencepiece::ImmutableSentencePieceText spt;
  const auto s = impl_->spp.Encode(text, spt.mutable_proto());
  if (!s.ok()) {
    *error = s.ToString();
    return false;
  }
  for (const auto& p : spt.pieces()) {
    ids->push_back(static_cast<int32_t>(p.id()));
    offsets->emplace_back(base + p.begin(), base + p.end());
  }
  return true;
}

int SpmProcessor::size() const { return impl_->spp.GetPieceSize(); }
std::string SpmProcessor::piece(int id) const { return impl_->spp.IdToPiece(id); }
float SpmProcessor::score(int id) const { return impl_->spp.GetScore(id); }
int SpmProcessor::type(int id) const {
  if (impl_->spp.IsUnknown(id)) return 2;
  if (impl_->spp.IsControl(id)) return 3;
  if (impl_->spp.IsUnused(id)) return 5;
  if (impl_->spp.IsByte(id)) return 6;
  return 1;
}
int SpmProcessor::bos_id() const { return impl_->spp.bos_id(); }
int SpmProcessor::eos_id() const { return impl_->spp.eos_id(); }
int SpmProcessor::unk_id() const { return impl_->spp.unk_id(); }

}  // namespace tokenizer_internal
}  // namespace vocabd
