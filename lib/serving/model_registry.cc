#include "lib/serving/model_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vocabd {

absl::Status ModelRegistry::AddImpl(std::shared_ptr<const Model> model) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string name = model->name();
  if (entries_.count(name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("model '", name, "' is already loaded"));
  }
  if (!default_chosen_ && default_name_.empty()) default_name_ = name;
  Entry& e = entries_[name];
  e.state = ModelState::kReady;
  e.model = std::move(model);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Model>> ModelRegistry::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string& key = name.empty() ? default_name_ : name;
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.state == ModelState::kUnloading) {
    if (name.empty()) {
      return absl::NotFoundError(default_name_.empty()
                                     ? std::string("no default model is loaded")
                                     : absl::StrCat("the default model '", default_name_,
                                                    "' is not loaded"));
    }
    std::vector<std::string> names;
    for (const auto& [n, e] : entries_) {
      if (e.state == ModelState::kReady) names.push_back(n);
    }
    return absl::NotFoundError(absl::StrCat("model '", name, "' not found; loaded models: [",
                                            absl::StrJoin(names, ", "), "]"));
  }
  const Entry& e = it->second;
  switch (e.state) {
    case ModelState::kReady: return e.model;
    case ModelState::kLoading:
      return absl::UnavailableError(absl::StrCat("model '", key, "' is loading"));
    case ModelState::kFailed:
      return absl::FailedPreconditionError(
          absl::StrCat("model '", key, "' failed to load: ", e.reason));
    case ModelState::kUnloading: break;
  }
  return absl::NotFoundError(absl::StrCat("model '", key, "' is unloading"));
}

std::vector<std::shared_ptr<const Model>> ModelRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const Model>> out;
  for (const auto& [n, e] : entries_) {
    if (e.state == ModelState::kReady) out.push_back(e.model);
  }
  return out;
}

std::vector<ModelStatus> ModelRegistry::Statuses() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelStatus> out;
  for (const auto& [n, e] : entries_) {
    ModelStatus s;
    s.name = n;
    s.state = e.state;
    s.reason = e.reason;
    s.model = e.model;
    s.reloading = e.loading && e.state == ModelState::kReady;
    s.is_default = n == default_name_;
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<ModelStatus> ModelRegistry::Status(const std::string& name) const {
  for (ModelStatus& s : Statuses()) {
    if (s.name == name) return std::move(s);
  }
  return absl::NotFoundError(absl::StrCat("model '", name, "' not found"));
}

std::string ModelRegistry::default_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return default_name_;
}

void ModelRegistry::SetDefaultNameImpl(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  default_name_ = name;
  default_chosen_ = true;
}

absl::Status ModelRegistry::BeginLoadImpl(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    Entry& e = it->second;
    if (e.loading) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name, "' is already being loaded"));
    }
    if (e.state == ModelState::kUnloading) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name, "' is being unloaded; retry when it is gone"));
    }
    e.loading = true;
    if (e.state == ModelState::kFailed) {
      e.state = ModelState::kLoading;
      e.reason.clear();
    }
    return absl::OkStatus();
  }
  Entry& e = entries_[name];
  e.state = ModelState::kLoading;
  e.loading = true;
  if (!default_chosen_ && default_name_.empty()) default_name_ = name;
  return absl::OkStatus();
}

void ModelRegistry::FinishLoadImpl(const std::string& name,
                                   absl::StatusOr<std::shared_ptr<const Model>> result) {
  std::shared_ptr<const Model> old;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  e.loading = false;
  if (result.ok()) {
    old = std::move(e.model);
    e.model = std::move(*result);
    e.state = ModelState::kReady;
    e.reason.clear();
    return;
  }
  if (e.state == ModelState::kLoading) {
    e.state = ModelState::kFailed;
    e.reason = std::string(result.status().message());
  }
  // READY (reload failed): keep serving the previous version untouched.
}

absl::StatusOr<std::weak_ptr<const Model>> ModelRegistry::BeginUnloadImpl(const std::string& name) {
  std::shared_ptr<const Model> released;  // dropped after the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' not found"));
  }
  Entry& e = it->second;
  if (e.loading) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' is being loaded; unload it when the load ends"));
  }
  if (e.state == ModelState::kUnloading) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", name, "' is already being unloaded"));
  }
  if (e.state == ModelState::kFailed) {
    entries_.erase(it);
    return std::weak_ptr<const Model>();
  }
  std::weak_ptr<const Model> weak = e.model;
  released = std::move(e.model);
  e.state = ModelState::kUnloading;
  return weak;
}

void ModelRegistry::FinishUnloadImpl(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.state == ModelState::kUnloading) entries_.erase(it);
}

// The public mutators: the change under the lock (the *Impl bodies), then
// the listener outside it.
absl::Status ModelRegistry::Add(std::shared_ptr<const Model> model) {
  absl::Status s = AddImpl(std::move(model));
  Notify();
  return s;
}

void ModelRegistry::set_default_name(const std::string& name) {
  SetDefaultNameImpl(name);
  Notify();
}

absl::Status ModelRegistry::BeginLoad(const std::string& name) {
  absl::Status s = BeginLoadImpl(name);
  Notify();
  return s;
}

void ModelRegistry::FinishLoad(const std::string& name,
                               absl::StatusOr<std::shared_ptr<const Model>> result) {
  FinishLoadImpl(name, std::move(result));
  Notify();
}

absl::StatusOr<std::weak_ptr<const Model>> ModelRegistry::BeginUnload(const std::string& name) {
  auto weak = BeginUnloadImpl(name);
  Notify();
  return weak;
}

void ModelRegistry::FinishUnload(const std::string& name) {
  FinishUnloadImpl(name);
  Notify();
}

void ModelRegistry::set_on_change(std::function<void()> on_change) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  on_change_ = std::move(on_change);
}

void ModelRegistry::Notify() {
  // Serialized, so listeners see changes in order and a slow listener
  // cannot publish an older state after a newer one.
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (on_change_) on_change_();
}

bool ModelRegistry::default_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(default_name_);
  return it != entries_.end() && it->second.state == ModelState::kReady;
}

}  // namespace vocabd
