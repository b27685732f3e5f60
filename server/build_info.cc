#include "server/build_info.h"

#include <dnnl.hpp>

#include "absl/strings/str_cat.h"

#ifndef VOCABD_VERSION
#define VOCABD_VERSION "unknown"
#endif
#ifndef VOCABD_GIT_SHA
#define VOCABD_GIT_SHA "unknown"
#endif
#ifndef VOCABD_COMPILER
#define VOCABD_COMPILER "unknown"
#endif
#ifndef VOCABD_BUILD_TYPE
#define VOCABD_BUILD_TYPE "unknown"
#endif

namespace vocabd {

std::vector<std::pair<std::string, std::string>> BuildInfo::Labels() const {
  return {{"version", version},
          {"git_sha", git_sha},
          {"compiler", compiler},
          {"onednn", onednn},
          {"build_type", build_type}};
}

std::string BuildInfo::ToString() const {
  std::string out;
  for (const auto& [key, value] : Labels()) {
    absl::StrAppend(&out, out.empty() ? "" : " ", key, "=", value);
  }
  return out;
}

const BuildInfo& GetBuildInfo() {
  static const BuildInfo* const info = [] {
    auto* b = new BuildInfo;
    b->version = VOCABD_VERSION;
    b->git_sha = VOCABD_GIT_SHA;
    b->compiler = VOCABD_COMPILER;
    b->build_type = VOCABD_BUILD_TYPE;
    const dnnl_version_t* v = dnnl_version();
    b->onednn = absl::StrCat(v->major, ".", v->minor, ".", v->patch);
    return b;
  }();
  return *info;
}

}  // namespace vocabd
