#include "lib/serving/model_repository.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/model_file.h"

namespace vocabd {
namespace {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", path));
  }
  return std::string(buffer);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// True when the directory holds anything but "." and "..".
bool HasEntries(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return false;
  bool any = false;
  while (dirent* e = ::readdir(dir)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") {
      any = true;
      break;
    }
  }
  ::closedir(dir);
  return any;
}

}  // namespace

absl::Status ModelRepository::Options::Validate() const {
  if (registry == nullptr) return absl::InvalidArgumentError("model repository needs a registry");
  if (!root.empty() && !IsDirectory(root)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-repository = ", root, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Create(const Options& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  std::string root;
  if (!options.root.empty()) {
    auto real = RealPath(options.root);
    if (!real.ok()) return real.status();
    root = *real;
  }
  Options copy = options;
  if (!copy.factory) {
    copy.factory = [](const std::string& name, const std::string& path) {
      Model::Options model_options;
      model_options.name = name;
      model_options.path = path;
      model_options.sha256_in_background = true;
      return Model::Create(model_options);
    };
  }
  return std::unique_ptr<ModelRepository>(new ModelRepository(std::move(copy), std::move(root)));
}

ModelRepository::~ModelRepository() {
  stopping_ = true;
  std::vector<Worker> workers;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    workers.swap(workers_);
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.stop_timeout;
  for (Worker& w : workers) {
    while (w.abandonable && !w.finished->load() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  {
    // From here no worker reports to the registry or its caller.
    std::lock_guard<std::mutex> lock(abandon_->mu);
    abandon_->abandoned = true;
  }
  for (Worker& w : workers) {
    if (w.finished->load() || !w.abandonable) {
      w.thread.join();  // unloads end at once on stopping_
    } else {
      w.thread.detach();  // a load stuck in the factory: left behind, see the header
    }
  }
}

absl::StatusOr<std::string> ModelRepository::Resolve(const std::string& name) const {
  if (root_.empty()) {
    return absl::FailedPreconditionError(
        "no model repository: start vocabd with --model-repository DIR to load models by name");
  }
  if (name.empty()) return absl::InvalidArgumentError("name is empty");
  if (name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\\') != std::string::npos || name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name = \"", name, "\" is not a model name (names only: no '/', '..' or absolute paths)"));
  }
  const std::string path = absl::StrCat(root_, "/", name);
  if (!IsDirectory(path)) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' is not in the model repository ",
                                            root_, " (available: [",
                                            absl::StrJoin(Available(), ", "), "])"));
  }
  auto real = RealPath(path);
  if (!real.ok()) return real.status();
  if (real->size() <= root_.size() || real->compare(0, root_.size(), root_) != 0 ||
      (*real)[root_.size()] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("name = \"", name, "\" resolves to ", *real,
                                                   ", outside the model repository ", root_));
  }
  return *real;
}

std::vector<std::string> ModelRepository::Available() const {
  std::vector<std::string> names;
  if (root_.empty()) return names;
  DIR* dir = ::opendir(root_.c_str());
  if (dir == nullptr) return names;
  while (dirent* e = ::readdir(dir)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    const std::string path = absl::StrCat(root_, "/", n);
    if (IsDirectory(path) && HasEntries(path)) names.push_back(n);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<std::shared_ptr<const Model>> ModelRepository::DoLoad(const std::string& name,
                                                                     const std::string& path) {
  return RunLoad(options_.factory, root_, name, path);
}

absl::StatusOr<std::shared_ptr<const Model>> ModelRepository::RunLoad(
    const ModelFactory& factory, const std::string& root, const std::string& name,
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<Model>> model;
  {
    // Every file the load opens (lib/core/model_file.h) must stay inside
    // the repository root, be a regular file, and never block on open.
    ScopedFileRoot confine(root);
    model = factory(name, path);
  }
  absl::StatusOr<std::shared_ptr<const Model>> result =
      model.ok() ? absl::StatusOr<std::shared_ptr<const Model>>(
                       std::shared_ptr<const Model>(std::move(*model)))
                 : absl::StatusOr<std::shared_ptr<const Model>>(absl::Status(
                       model.status().code(), absl::StrCat("loading model '", name, "' from ",
                                                           path, ": ", model.status().message())));
  return result;
}

absl::StatusOr<std::shared_ptr<const Model>> ModelRepository::Load(const std::string& name) {
  auto path = Resolve(name);
  if (!path.ok()) return path.status();
  if (absl::Status s = options_.registry->BeginLoad(name); !s.ok()) return s;
  auto result = DoLoad(name, *path);
  options_.registry->FinishLoad(name, result);
  return result;
}

void ModelRepository::LoadAsync(const std::string& name, LoadDone done) {
  auto path = Resolve(name);
  if (!path.ok()) {
    done(path.status());
    return;
  }
  if (absl::Status s = options_.registry->BeginLoad(name); !s.ok()) {
    done(s);
    return;
  }
  // The thread touches nothing of `this`: a load the destructor abandons
  // (stop_timeout) may end after the repository is gone.
  Spawn([factory = options_.factory, root = root_, registry = options_.registry,
         abandon = abandon_, name, path = *path, done = std::move(done)] {
    auto result = RunLoad(factory, root, name, path);
    std::lock_guard<std::mutex> lock(abandon->mu);
    if (abandon->abandoned) return;
    registry->FinishLoad(name, result);
    done(std::move(result));
  }, /*abandonable=*/true);
}

void ModelRepository::UnloadAsync(const std::string& name, UnloadDone done) {
  if (name.empty()) {
    done(absl::InvalidArgumentError("name is empty"));
    return;
  }
  auto weak = options_.registry->BeginUnload(name);
  if (!weak.ok()) {
    done(weak.status());
    return;
  }
  Spawn([this, name, weak = *weak, done = std::move(done)] {
    // In-flight calls hold shared_ptr copies; the model is freed when the
    // last one ends.
    while (!weak.expired() && !stopping_) std::this_thread::sleep_for(options_.unload_poll);
    options_.registry->FinishUnload(name);
    done(weak.expired() ? absl::OkStatus()
                        : absl::CancelledError(absl::StrCat(
                              "server shutting down before in-flight calls on model '", name,
                              "' ended")));
  }, /*abandonable=*/false);
}

void ModelRepository::Spawn(std::function<void()> work, bool abandonable) {
  std::lock_guard<std::mutex> lock(threads_mu_);
  // Reap finished workers.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->finished->load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  workers_.push_back(Worker{std::thread([work = std::move(work), finished] {
                              work();
                              finished->store(true);
                            }),
                            finished, abandonable});
}

}  // namespace vocabd
