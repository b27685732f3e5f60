#include "lib/checkpoint/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/checkpoint/gguf_checkpoint.h"
#include "lib/checkpoint/hf_config.h"
#include "lib/checkpoint/llama2c.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

bool IsFloating(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (!dir.empty() && dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

enum class PathKind { kMissing, kFile, kDirectory, kOther };

PathKind Stat(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PathKind::kMissing;
  if (S_ISREG(st.st_mode)) return PathKind::kFile;
  if (S_ISDIR(st.st_mode)) return PathKind::kDirectory;
  return PathKind::kOther;
}

bool IsCanonical(const std::string& name) { return IsCanonicalTensor(name); }

// Gemma's RMSNorm multiplies by (1 + weight) in fp32 (GemmaRMSNorm,
// Gemma2RMSNorm, Gemma3RMSNorm: output * (1.0 + self.weight.float())); fold
// it into the served final-norm weight once, so RmsNorm applies as usual.
void FoldGemmaNorm(Checkpoint* ckpt) {
  if (!ckpt->config().norm_one_plus_weight) return;
  const WeightTensor* norm = ckpt->Find(kFinalNorm);
  if (norm == nullptr || norm->dtype != DType::kF32) return;
  std::vector<uint8_t> buffer(norm->nbytes);
  const float* src = norm->f32();
  float* dst = reinterpret_cast<float*>(buffer.data());
  for (int64_t j = 0; j < norm->num_elements(); ++j) dst[j] = 1.0f + src[j];
  WeightTensor t = *norm;
  ckpt->AdoptBuffer(std::move(buffer));
  t.data = ckpt->last_buffer().data();
  ckpt->AddTensor(kFinalNorm, t);
}

// Adds the tensors of one parsed safetensors shard. `expected` (from the
// shard index, may be null) maps each tensor name to its shard file name.
// Returns whether any tensor points into the mapping.
absl::StatusOr<bool> AddSafetensorsTensors(const MappedFile& file, const SafetensorsHeader& header,
                                           const std::map<std::string, std::string>* expected,
                                           const std::string& shard_name, Checkpoint* ckpt) {
  bool any_mapped = false;
  const bool tied = ckpt->config().tie_word_embeddings;
  std::map<std::string, std::string> renames;
  for (const auto& [from, to] : HfCanonicalTensorNames(ckpt->config().architecture)) {
    renames.emplace(from, to);
  }
  for (const auto& [file_name, entry] : header.tensors) {
    if (expected != nullptr) {
      auto it = expected->find(file_name);
      if (it == expected->end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file.path(), ": tensor \"", file_name,
            "\" is not listed in the shard index weight_map"));
      }
      if (it->second != shard_name) {
        return absl::InvalidArgumentError(
            absl::StrCat(file.path(), ": tensor \"", file_name, "\" is in shard ", shard_name,
                         " but the index weight_map puts it in ", it->second));
      }
    }
    auto rename = renames.find(file_name);
    const std::string name = rename == renames.end() ? file_name : rename->second;
    if (ckpt->Find(name) != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          file.path(), ": tensor \"", file_name, "\" (", name,
          ") appears twice (in more than one shard or under two names)"));
    }
    // Tied: the head is the embedding; a stored copy is ignored.
    if (tied && name == kLmHead) continue;
    const uint8_t* src = file.data() + entry.begin;
    const size_t nbytes = static_cast<size_t>(entry.end - entry.begin);
    const size_t n = nbytes / DTypeSize(entry.dtype);
    WeightTensor t;
    t.shape = entry.shape;
    t.stored_dtype = entry.dtype;
    t.stored_type = GgmlTypeOf(entry.dtype);
    if (IsCanonical(name) && !IsTableTensor(name) && IsFloating(entry.dtype) &&
        entry.dtype != DType::kF32) {
      // Small canonical tensors (norms, biases, positions): converted once
      // to an owned F32 buffer.
      std::vector<uint8_t> buffer(n * sizeof(float));
      ConvertToF32(entry.dtype, src, n, reinterpret_cast<float*>(buffer.data()));
      ckpt->AdoptBuffer(std::move(buffer));
      t.dtype = DType::kF32;
      t.data = ckpt->last_buffer().data();
      t.nbytes = n * sizeof(float);
    } else if (reinterpret_cast<uintptr_t>(src) % DTypeSize(entry.dtype) != 0) {
      // Misaligned for its element type: copy (std::vector storage comes
      // from operator new, aligned for any scalar).
      ckpt->AdoptBuffer(std::vector<uint8_t>(src, src + nbytes));
      t.dtype = entry.dtype;
      t.data = ckpt->last_buffer().data();
      t.nbytes = nbytes;
    } else {
      // In place from the mapping: F32, BF16 and F16 tables (the model
      // converts F16 straight from here into its serving dtype) and every
      // other tensor.
      t.dtype = entry.dtype;
      t.data = src;
      t.nbytes = nbytes;
      any_mapped = true;
    }
    ckpt->AddTensor(name, std::move(t));
  }
  return any_mapped;
}

absl::Status LoadConfigJson(const std::string& config_path, Checkpoint* ckpt) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(config_path));
  const std::string text(reinterpret_cast<const char*>(file->data()), file->size());
  ASSIGN_OR_RETURN(ckpt->mutable_config(), ParseHfConfig(text, config_path));
  ckpt->AddSourceInfo(DescribeSourceFile(*file, "config.json"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadSafetensorsSingle(
    const std::string& config_path, const std::string& weights_path) {
  auto ckpt = std::make_unique<Checkpoint>();
  RETURN_IF_ERROR(LoadConfigJson(config_path, ckpt.get()));
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(weights_path));
  ASSIGN_OR_RETURN(SafetensorsHeader header,
                   ParseSafetensorsHeader(file->data(), file->size(), weights_path));
  ASSIGN_OR_RETURN(bool mapped, AddSafetensorsTensors(*file, header, nullptr, "", ckpt.get()));
  SourceFileInfo info = DescribeSourceFile(*file, "safetensors");
  info.memory_mapped = mapped;
  ckpt->AddFile(std::move(file), std::move(info));
  FoldGemmaNorm(ckpt.get());
  RETURN_IF_ERROR(ckpt->Finalize());
  return ckpt;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadSafetensorsSharded(const std::string& config_path,
                                                                   const std::string& index_path) {
  auto ckpt = std::make_unique<Checkpoint>();
  RETURN_IF_ERROR(LoadConfigJson(config_path, ckpt.get()));
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> index_file, MappedFile::Open(index_path));
  auto invalid = [&index_path](const std::string& rule) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", rule));
  };
  const nlohmann::json index = nlohmann::json::parse(
      reinterpret_cast<const char*>(index_file->data()),
      reinterpret_cast<const char*>(index_file->data()) + index_file->size(), nullptr, false);
  if (index.is_discarded() || !index.is_object()) return invalid("not a JSON object");
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object()) {
    return invalid("key \"weight_map\" is missing or not an object");
  }
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;  // in order of first appearance
  std::set<std::string> seen;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      return invalid(absl::StrCat("weight_map[\"", it.key(), "\"] is a JSON ",
                                  it.value().type_name(), ", not a file name"));
    }
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      return invalid(absl::StrCat("weight_map[\"", it.key(), "\"] = \"", shard,
                                  "\" is not a plain file name in the checkpoint directory"));
    }
    weight_map[it.key()] = shard;
    if (seen.insert(shard).second) shards.push_back(shard);
  }
  ckpt->AddSourceInfo(DescribeSourceFile(*index_file, "safetensors.index.json"));
  const std::string dir = DirName(index_path);
  for (const std::string& shard : shards) {
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(JoinPath(dir, shard)));
    ASSIGN_OR_RETURN(SafetensorsHeader header,
                     ParseSafetensorsHeader(file->data(), file->size(), file->path()));
    ASSIGN_OR_RETURN(bool mapped,
                     AddSafetensorsTensors(*file, header, &weight_map, shard, ckpt.get()));
    SourceFileInfo info = DescribeSourceFile(*file, "safetensors");
    info.memory_mapped = mapped;
    ckpt->AddFile(std::move(file), std::move(info));
  }
  std::map<std::string, std::string> renames;
  for (const auto& [from, to] : HfCanonicalTensorNames(ckpt->config().architecture)) {
    renames.emplace(from, to);
  }
  for (const auto& [name, shard] : weight_map) {
    auto rename = renames.find(name);
    const std::string canonical = rename == renames.end() ? name : rename->second;
    if (ckpt->Find(canonical) == nullptr &&
        !(canonical == kLmHead && ckpt->config().tie_word_embeddings)) {
      return invalid(
          absl::StrCat("weight_map lists tensor \"", name, "\" but shard ", shard, " lacks it"));
    }
  }
  FoldGemmaNorm(ckpt.get());
  RETURN_IF_ERROR(ckpt->Finalize());
  return ckpt;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadHfDirectory(const std::string& dir) {
  const std::string config_path = JoinPath(dir, "config.json");
  const std::string single = JoinPath(dir, "model.safetensors");
  const std::string index = JoinPath(dir, "model.safetensors.index.json");
  if (Stat(config_path) != PathKind::kFile) {
    // A directory named after a llama2.c checkpoint it holds (models/X/X.bin).
    const std::string bin = JoinPath(dir, BaseName(dir) + ".bin");
    if (Stat(bin) == PathKind::kFile) return LoadLlama2c(bin);
    const std::string gguf = JoinPath(dir, BaseName(dir) + ".gguf");
    if (Stat(gguf) == PathKind::kFile) return LoadGguf(gguf);
    // Otherwise the folder's only checkpoint file, whatever its name
    // (tiny/llama-2-tiny-random.gguf).
    std::vector<std::string> files;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if ((EndsWith(name, ".gguf") || EndsWith(name, ".bin")) &&
            Stat(JoinPath(dir, name)) == PathKind::kFile) {
          files.push_back(name);
        }
      }
      ::closedir(d);
    }
    std::sort(files.begin(), files.end());
    if (files.size() == 1) {
      const std::string only = JoinPath(dir, files[0]);
      return EndsWith(only, ".gguf") ? LoadGguf(only) : LoadLlama2c(only);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint directory ", dir, " has no config.json, no ", BaseName(dir), ".bin or ",
        BaseName(dir), ".gguf, and ",
        files.empty() ? std::string("no .bin or .gguf file")
                      : absl::StrCat(files.size(), " .bin/.gguf files (", absl::StrJoin(files, ", "),
                                     "); keep one, or name the one to serve ", BaseName(dir),
                                     ".bin / .gguf")));
  }
  if (Stat(single) == PathKind::kFile) return LoadSafetensorsSingle(config_path, single);
  if (Stat(index) == PathKind::kFile) return LoadSafetensorsSharded(config_path, index);
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint directory ", dir,
      " has config.json but neither model.safetensors nor model.safetensors.index.json"));
}

const WeightTensor& EmptyTensor() {
  static const WeightTensor* const kEmpty = new WeightTensor();
  return *kEmpty;
}

}  // namespace

bool IsTableTensor(const std::string& name) { return name == kEmbedTokens || name == kLmHead; }

quant::GgmlType GgmlTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kF16: return quant::GgmlType::kF16;
    case DType::kBF16: return quant::GgmlType::kBF16;
    default: return quant::GgmlType::kF32;
  }
}

quant::GgmlType WeightTensor::ggml_type() const {
  return quant_type.has_value() ? *quant_type : GgmlTypeOf(dtype);
}

std::string WeightTensor::type_name() const {
  if (quant_type.has_value()) return quant::GgmlTypeName(*quant_type);
  if (dtype == DType::kI32) return "i32";
  if (dtype == DType::kI64) return "i64";
  return quant::GgmlTypeName(GgmlTypeOf(dtype));
}

bool IsCanonicalTensor(const std::string& name) {
  return name == kEmbedTokens || name == kLmHead || name == kFinalNorm ||
         name == kFinalNormBias || name == kLmHeadBias || name == kPositionEmbeddings ||
         name == kTokenTypeEmbeddings || name == kEmbedNorm || name == kEmbedNormBias;
}

int64_t WeightTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const WeightTensor* Checkpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const WeightTensor& Checkpoint::embedding() const {
  const WeightTensor* t = Find(kEmbedTokens);
  return t != nullptr ? *t : EmptyTensor();
}

const WeightTensor& Checkpoint::lm_head() const {
  if (!config_.tie_word_embeddings) {
    const WeightTensor* t = Find(kLmHead);
    if (t != nullptr) return *t;
  }
  return embedding();
}

int64_t Checkpoint::resident_bytes() const {
  int64_t total = 0;
  for (const auto& [name, t] : tensors_) {
    if (IsCanonicalTensor(name)) total += static_cast<int64_t>(t.nbytes);
  }
  return total;
}

const MappedFile* Checkpoint::MappingOf(const void* p, size_t n) const {
  for (const auto& m : mappings_) {
    if (m->Contains(p, n)) return m.get();
  }
  return nullptr;
}

void Checkpoint::ReleaseBuffer(const void* data) {
  for (auto it = owned_.begin(); it != owned_.end(); ++it) {
    if ((*it)->data() == data) {
      owned_.erase(it);
      return;
    }
  }
  for (auto it = owned_huge_.begin(); it != owned_huge_.end(); ++it) {
    if (it->data() == data) {
      owned_huge_.erase(it);
      return;
    }
  }
}

SourceFileInfo DescribeSourceFile(const MappedFile& file, std::string format) {
  SourceFileInfo info;
  info.path = file.path();
  info.format = std::move(format);
  info.size_bytes = static_cast<int64_t>(file.size());
  if (info.format == "config.json" || info.format == "safetensors.index.json") {
    info.sha256 = file.Sha256Hex();
  }
  return info;
}

void Checkpoint::AddFile(std::unique_ptr<MappedFile> file, SourceFileInfo info) {
  if (info.sha256.empty()) to_hash_.emplace_back(files_.size(), file.get());
  if (info.memory_mapped) served_mappings_.push_back(file.get());
  mappings_.push_back(std::move(file));
  files_.push_back(std::move(info));
}

absl::Status Checkpoint::CheckFiles() const {
  for (const MappedFile* file : served_mappings_) {
    if (absl::Status s = file->CheckIntact(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

Checkpoint::~Checkpoint() {
  cancel_hash_ = true;
  if (hasher_.joinable()) hasher_.join();
}

void Checkpoint::HashFiles(bool background) {
  if (to_hash_.empty()) return;
  if (!background) {
    for (const auto& [index, file] : to_hash_) files_[index].sha256 = file->Sha256Hex();
    to_hash_.clear();
    return;
  }
  for (const auto& [index, file] : to_hash_) files_[index].sha256_pending = true;
  hashing_ = true;
  hasher_ = std::thread([this, jobs = to_hash_] {
    for (const auto& [index, file] : jobs) {
      std::string hex = file->Sha256Hex(&cancel_hash_);
      std::lock_guard<std::mutex> lock(hash_mu_);
      hashed_[index] = std::move(hex);
    }
    std::lock_guard<std::mutex> lock(hash_mu_);
    hashing_ = false;
    hash_cv_.notify_all();
  });
  to_hash_.clear();
}

std::vector<SourceFileInfo> Checkpoint::SourceFilesSnapshot() const {
  std::vector<SourceFileInfo> out = files_;
  std::lock_guard<std::mutex> lock(hash_mu_);
  for (const auto& [index, hex] : hashed_) {
    if (hex.empty()) continue;  // cancelled
    out[index].sha256 = hex;
    out[index].sha256_pending = false;
  }
  return out;
}

bool Checkpoint::WaitForSha256(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(hash_mu_);
  return hash_cv_.wait_for(lock, timeout, [this] { return !hashing_; });
}

absl::Status Checkpoint::Finalize() {
  std::vector<std::string> weight_files;
  for (const SourceFileInfo& f : files_) {
    if (f.format != "config.json" && f.format != "safetensors.index.json") {
      weight_files.push_back(f.path);
    }
  }
  const std::string where =
      weight_files.empty() ? "checkpoint" : absl::StrJoin(weight_files, ", ");

  if (absl::Status s = config_.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": model config: ", s.message()));
  }
  for (const auto& [name, t] : tensors_) {
    const int64_t n = t.num_elements();
    size_t want_bytes = static_cast<size_t>(n) * DTypeSize(t.dtype);
    if (t.quant_type.has_value()) {
      const int64_t row = t.shape.empty() ? 0 : t.shape.back();
      const int64_t row_bytes = quant::RowBytes(*t.quant_type, row);
      want_bytes = row_bytes < 0 || row == 0 ? 0 : static_cast<size_t>(n / row * row_bytes);
    }
    if (n < 0 || want_bytes != t.nbytes || (t.nbytes > 0 && t.data == nullptr)) {
      return absl::InternalError(absl::StrCat(where, ": tensor \"", name, "\" ", t.type_name(),
                                              " ", ShapeString(t.shape), " holds ", t.nbytes,
                                              " bytes"));
    }
  }
  auto check = [&](const char* name, std::vector<int64_t> want) -> absl::Status {
    const WeightTensor* t = Find(name);
    if (t == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": required tensor \"", name, "\" is missing"));
    }
    if (t->shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": tensor \"", name, "\" has shape ",
                                                     ShapeString(t->shape), " but the config needs ",
                                                     ShapeString(want)));
    }
    if (t->quant_type.has_value()) {
      if (!IsTableTensor(name) || !quant::IsServedType(*t->quant_type)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": tensor \"", name, "\" has ggml type ", t->type_name(),
            ", which vocabd does not serve for it"));
      }
    } else if (!IsFloating(t->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": tensor \"", name, "\" has dtype ",
                                                     std::string(DTypeName(t->dtype)),
                                                     ", not a float type (F32/F16/BF16)"));
    }
    return absl::OkStatus();
  };
  const int64_t vocab = config_.vocab_size, hidden = config_.hidden_size;
  RETURN_IF_ERROR(check(kEmbedTokens, {vocab, hidden}));
  if (config_.final_norm_kind != NormKind::kNone) RETURN_IF_ERROR(check(kFinalNorm, {hidden}));
  if (Find(kFinalNormBias) != nullptr) {
    if (config_.final_norm_kind != NormKind::kLayerNorm) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tensor \"", kFinalNormBias, "\" is present but the final norm is not LayerNorm"));
    }
    if (config_.norm_without_bias) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tensor \"", kFinalNormBias, "\" is present but family \"", config_.family,
          "\" has a LayerNorm without bias"));
    }
    RETURN_IF_ERROR(check(kFinalNormBias, {hidden}));
  }
  if (Find(kLmHeadBias) != nullptr) RETURN_IF_ERROR(check(kLmHeadBias, {vocab}));
  if (config_.embedding_layer_norm) {
    RETURN_IF_ERROR(check(kEmbedNorm, {hidden}));
    RETURN_IF_ERROR(check(kEmbedNormBias, {hidden}));
  }
  if (config_.embedding_token_type) {
    const WeightTensor* tt = Find(kTokenTypeEmbeddings);
    if (tt == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": required tensor \"", kTokenTypeEmbeddings, "\" is missing"));
    }
    if (tt->shape.size() != 2 || tt->shape[0] <= 0 || tt->shape[1] != hidden) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": tensor \"", kTokenTypeEmbeddings,
                                                     "\" has shape ", ShapeString(tt->shape),
                                                     " but the config needs [types, ", hidden,
                                                     "]"));
    }
  }
  if (config_.position_scheme == PositionScheme::kLearned) {
    const WeightTensor* wpe = Find(kPositionEmbeddings);
    if (wpe == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": learned absolute positions need tensor \"", kPositionEmbeddings,
          "\", which is missing"));
    }
    if (wpe->shape.size() != 2 || wpe->shape[1] != hidden || wpe->shape[0] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": tensor \"", kPositionEmbeddings,
                                                     "\" has shape ", ShapeString(wpe->shape),
                                                     " but the config needs [positions, ",
                                                     hidden, "]"));
    }
  }
  if (config_.tie_word_embeddings) {
    // One copy in memory: the head is the embedding table.
    tensors_.erase(kLmHead);
  } else {
    if (Find(kLmHead) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": the config says the LM head is untied (tie_word_embeddings = false) but "
                 "tensor \"",
          kLmHead, "\" is missing"));
    }
    RETURN_IF_ERROR(check(kLmHead, {vocab, hidden}));
  }
  return absl::OkStatus();
}

namespace {
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadAnyForm(const std::string& path);
}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadCheckpoint(const std::string& path,
                                                           const LoadOptions& options) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> ckpt = LoadAnyForm(path);
  if (ckpt.ok()) (*ckpt)->HashFiles(options.sha256_in_background);
  return ckpt;
}

namespace {
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadAnyForm(const std::string& path) {
  switch (Stat(path)) {
    case PathKind::kMissing:
      return absl::NotFoundError(absl::StrCat("checkpoint path ", path, " does not exist"));
    case PathKind::kOther:
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint path ", path, " is neither a regular file nor a directory"));
    case PathKind::kDirectory:
      return LoadHfDirectory(path);
    case PathKind::kFile:
      break;
  }
  if (EndsWith(path, ".bin")) return LoadLlama2c(path);
  const bool single = EndsWith(path, ".safetensors");
  const bool index = EndsWith(path, ".safetensors.index.json");
  if (single || index) {
    const std::string config_path = JoinPath(DirName(path), "config.json");
    if (Stat(config_path) != PathKind::kFile) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no config.json beside it (expected ", config_path, ")"));
    }
    return single ? LoadSafetensorsSingle(config_path, path)
                  : LoadSafetensorsSharded(config_path, path);
  }
  if (EndsWith(path, ".gguf")) return LoadGguf(path);
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": unknown checkpoint format (expected a directory with config.json, a llama2.c "
            ".bin, a .gguf, a .safetensors or .safetensors.index.json file)"));
}

}  // namespace

}  // namespace vocabd
