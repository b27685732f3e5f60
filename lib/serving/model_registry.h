// The models a server holds, by name, with their state and one default
// model. Thread-safe.
//
// States (ListModels): LOADING (a load is running and no earlier version
// serves), READY (serving; a reload may be running, see `reloading`),
// FAILED (the last load failed and nothing serves; `reason` says why),
// UNLOADING (removed from serving, waiting for in-flight calls to end).
// A failed load of a model that was READY leaves it READY with the old
// weights (the error goes to the caller of the load only).
#ifndef VOCABD_LIB_SERVING_MODEL_REGISTRY_H_
#define VOCABD_LIB_SERVING_MODEL_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/serving/model.h"

namespace vocabd {

enum class ModelState { kLoading, kReady, kFailed, kUnloading };

struct ModelStatus {
  std::string name;
  ModelState state = ModelState::kLoading;
  // FAILED: why the load failed. Empty otherwise.
  std::string reason;
  // READY (and UNLOADING): the serving model. Null for LOADING / FAILED.
  std::shared_ptr<const Model> model;
  // READY and a new version is being loaded.
  bool reloading = false;
  bool is_default = false;
};

class ModelRegistry {
 public:
  // Adds a loaded model (READY). ALREADY_EXISTS for a name that has an
  // entry. The first model added becomes the default unless
  // set_default_name() chose one.
  absl::Status Add(std::shared_ptr<const Model> model);
  // The READY model named `name`; "" = the default model. NOT_FOUND names
  // the model and lists the ready ones; UNAVAILABLE while LOADING;
  // FAILED_PRECONDITION (with the reason) when FAILED; NOT_FOUND when
  // UNLOADING. The returned pointer keeps the model alive for the duration
  // of a call even if it is unloaded meanwhile (unload waits for it).
  absl::StatusOr<std::shared_ptr<const Model>> Get(const std::string& name) const;
  // All READY models in name order.
  std::vector<std::shared_ptr<const Model>> List() const;
  // Every entry (any state) in name order.
  std::vector<ModelStatus> Statuses() const;
  // NOT_FOUND when there is no entry.
  absl::StatusOr<ModelStatus> Status(const std::string& name) const;
  std::string default_name() const;
  // Requests naming no model go to `name` (need not be loaded yet).
  void set_default_name(const std::string& name);

  // Load protocol (lib/serving/model_repository.h). BeginLoad: FAILED_PRECONDITION
  // when a load or unload of `name` is already running; else the entry
  // becomes LOADING (or READY + reloading). FinishLoad installs the model
  // (READY; the old version is released once its in-flight calls end) or,
  // on error, restores the previous state (FAILED with the reason when no
  // version was serving).
  absl::Status BeginLoad(const std::string& name);
  void FinishLoad(const std::string& name, absl::StatusOr<std::shared_ptr<const Model>> result);

  // Unload protocol. BeginUnload: NOT_FOUND for an unknown name,
  // FAILED_PRECONDITION while a load/unload of it runs. A FAILED entry is
  // removed at once (returns an expired pointer). A READY one becomes
  // UNLOADING: new calls get NOT_FOUND; the registry drops its reference
  // and returns a weak pointer that expires when the last in-flight call
  // releases the model. FinishUnload removes the entry.
  absl::StatusOr<std::weak_ptr<const Model>> BeginUnload(const std::string& name);
  void FinishUnload(const std::string& name);

  // True when the default model (default_name()) is READY (also while a
  // reload of it runs); false while it is LOADING, FAILED, UNLOADING or
  // absent. The server's overall health follows this.
  bool default_ready() const;
  // Called after every change of an entry's state or of the default name
  // (Add, set_default_name, Begin/FinishLoad, Begin/FinishUnload), on the
  // thread that made it, outside the registry's lock (it may call the
  // getters above), one call at a time. Empty = none.
  void set_on_change(std::function<void()> on_change);

 private:
  absl::Status AddImpl(std::shared_ptr<const Model> model);
  void SetDefaultNameImpl(const std::string& name);
  absl::Status BeginLoadImpl(const std::string& name);
  void FinishLoadImpl(const std::string& name,
                      absl::StatusOr<std::shared_ptr<const Model>> result);
  absl::StatusOr<std::weak_ptr<const Model>> BeginUnloadImpl(const std::string& name);
  void FinishUnloadImpl(const std::string& name);
  void Notify();

  std::mutex listener_mu_;  // taken after mu_ is released, never with it
  std::function<void()> on_change_;

  struct Entry {
    ModelState state = ModelState::kLoading;
    std::string reason;
    std::shared_ptr<const Model> model;
    bool loading = false;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::string default_name_;
  bool default_chosen_ = false;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_SERVING_MODEL_REGISTRY_H_
