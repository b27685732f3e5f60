// What every RPC handler shares: the models, the compute pool, limits.
#ifndef VOCABD_SERVER_SERVICE_CONTEXT_H_
#define VOCABD_SERVER_SERVICE_CONTEXT_H_

#include <cstdint>

#include "lib/compute_pool.h"
#include "lib/model_registry.h"

namespace vocabd {

struct ServiceContext {
  ModelRegistry* registry = nullptr;
  // Runs LM-head work off the reactor threads.
  ComputePool* compute_pool = nullptr;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_SERVICE_CONTEXT_H_
