// The models a server holds, by name, with one default model.
#ifndef VOCABD_LIB_MODEL_REGISTRY_H_
#define VOCABD_LIB_MODEL_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/model.h"

namespace vocabd {

class ModelRegistry {
 public:
  // Adds a loaded model. ALREADY_EXISTS for a duplicate name. The first
  // model added becomes the default.
  absl::Status Add(std::shared_ptr<const Model> model);
  // The model named `name`; "" = the default model. NOT_FOUND names the
  // model and lists the loaded ones. The returned pointer keeps the model
  // alive for the duration of a call even if it is removed meanwhile.
  absl::StatusOr<std::shared_ptr<const Model>> Get(const std::string& name) const;
  // All models in name order.
  std::vector<std::shared_ptr<const Model>> List() const;
  std::string default_name() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Model>> models_;
  std::string default_name_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_MODEL_REGISTRY_H_
