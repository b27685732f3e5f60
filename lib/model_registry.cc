#include "lib/model_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vocabd {

absl::Status ModelRegistry::Add(std::shared_ptr<const Model> model) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& name = model->name();
  if (models_.count(name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already loaded"));
  }
  if (models_.empty()) default_name_ = name;
  models_.emplace(name, std::move(model));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Model>> ModelRegistry::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& key = name.empty() ? default_name_ : name;
  auto it = models_.find(key);
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& [n, m] : models_) names.push_back(n);
    if (name.empty()) return absl::NotFoundError("no default model is loaded");
    return absl::NotFoundError(absl::StrCat("model '", name, "' not found; loaded models: [",
                                            absl::StrJoin(names, ", "), "]"));
  }
  return it->second;
}

std::vector<std::shared_ptr<const Model>> ModelRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const Model>> out;
  for (const auto& [n, m] : models_) out.push_back(m);
  return out;
}

std::string ModelRegistry::default_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return default_name_;
}

}  // namespace vocabd
