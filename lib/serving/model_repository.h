// A model repository: a root directory whose subfolders are models, loaded
// and unloaded by name on background threads (never on the caller's
// thread), with their state kept in a ModelRegistry.
//
//   <root>/<name>/   any form LoadCheckpoint accepts for a directory:
//                    config.json + model.safetensors[.index.json], or
//                    <name>.bin (llama2.c), <name>.gguf, or one .gguf /
//                    .bin file of any name.
//
// Sealing: the factory runs under a ScopedFileRoot(root) (see
// lib/core/model_file.h), so every file a load opens (config.json, the
// index, shards, .bin, .gguf, tokenizer files) must resolve inside the root
// (INVALID_ARGUMENT for a link out of it) and be a regular file
// (INVALID_ARGUMENT for a FIFO, device, socket or directory, refused before
// it is opened, so no load blocks on one).
#ifndef VOCABD_LIB_SERVING_MODEL_REPOSITORY_H_
#define VOCABD_LIB_SERVING_MODEL_REPOSITORY_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/serving/model.h"
#include "lib/serving/model_registry.h"

namespace vocabd {

class ModelRepository {
 public:
  using ModelFactory =
      std::function<absl::StatusOr<std::unique_ptr<Model>>(const std::string& name,
                                                           const std::string& path)>;
  struct Options {
    // Repository root; empty = no repository (Load* answer
    // FAILED_PRECONDITION; Unload* still work for models added otherwise).
    std::string root;
    ModelRegistry* registry = nullptr;  // not owned; required
    // Builds a model from a resolved path (default: Model::Create with
    // {name, path}). Runs on a background thread.
    ModelFactory factory;
    // How often an unload re-checks that in-flight calls released the model.
    std::chrono::milliseconds unload_poll{2};
    // How long the destructor waits for running loads (the server passes
    // --drain-timeout-ms). A load still running then (a factory stuck in
    // the kernel, e.g. on a hung network filesystem) is abandoned: its
    // thread is detached, and when it ends it reports to nobody (neither
    // the registry nor its LoadDone). Meant for process exit.
    std::chrono::milliseconds stop_timeout{30000};
    // INVALID_ARGUMENT for a null registry, a root that is not a directory.
    absl::Status Validate() const;
  };
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Create(const Options& options);
  // Stops waiting unloads and joins every background thread that ends
  // within options.stop_timeout (see there for the others).
  ~ModelRepository();

  const std::string& root() const { return root_; }

  // The directory of model `name`. Names only: INVALID_ARGUMENT for "",
  // ".", "..", names with '/' or '\0', or a subfolder whose real path
  // (symlinks resolved) is outside the root; NOT_FOUND when no such
  // subfolder exists (message lists the available names);
  // FAILED_PRECONDITION without a repository.
  absl::StatusOr<std::string> Resolve(const std::string& name) const;
  // Names of the subfolders that hold anything (an empty folder is no
  // model: not listed, though LoadModel of it still reports what the
  // loader misses), sorted.
  std::vector<std::string> Available() const;

  using LoadDone = std::function<void(absl::StatusOr<std::shared_ptr<const Model>>)>;
  using UnloadDone = std::function<void(absl::Status)>;
  // Loads (or reloads) `name` on a background thread; `done` runs exactly
  // once, on that thread, or inline for errors found before starting (bad
  // name, load/unload already running). On failure the registry keeps its
  // previous state for `name` (FAILED with the reason if nothing served).
  void LoadAsync(const std::string& name, LoadDone done);
  // Blocking form (startup).
  absl::StatusOr<std::shared_ptr<const Model>> Load(const std::string& name);
  // Removes `name` from serving at once, then (on a background thread)
  // waits until every in-flight call has released it and frees it; `done`
  // runs then (or inline for NOT_FOUND / FAILED_PRECONDITION).
  void UnloadAsync(const std::string& name, UnloadDone done);

 private:
  explicit ModelRepository(Options options, std::string root)
      : options_(std::move(options)), root_(std::move(root)) {}
  absl::StatusOr<std::shared_ptr<const Model>> DoLoad(const std::string& name,
                                                      const std::string& path);
  // The factory under the file root; touches no member.
  static absl::StatusOr<std::shared_ptr<const Model>> RunLoad(const ModelFactory& factory,
                                                              const std::string& root,
                                                              const std::string& name,
                                                              const std::string& path);
  // `abandonable`: a load thread the destructor may detach (touches no
  // member); unload threads are always joined.
  void Spawn(std::function<void()> work, bool abandonable);

  Options options_;
  std::string root_;  // realpath of options_.root ("" = none)
  std::atomic<bool> stopping_{false};
  // Shared with load threads: once `abandoned`, they report to nobody.
  struct Abandon {
    std::mutex mu;
    bool abandoned = false;
  };
  std::shared_ptr<Abandon> abandon_ = std::make_shared<Abandon>();
  std::mutex threads_mu_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
    bool abandonable = false;
  };
  std::vector<Worker> workers_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_SERVING_MODEL_REPOSITORY_H_
