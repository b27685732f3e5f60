// What this binary is: version, git commit, compiler and oneDNN version.
// Logged at startup and exported as the vocabd_build_info metric.
#ifndef VOCABD_SERVER_BUILD_INFO_H_
#define VOCABD_SERVER_BUILD_INFO_H_

#include <string>
#include <utility>
#include <vector>

namespace vocabd {

struct BuildInfo {
  std::string version;  // CMake project VERSION, e.g. "0.1.0"
  std::string git_sha;  // `git rev-parse --short=12 HEAD` at configure time ("unknown" outside git)
  std::string compiler;  // e.g. "GNU 12.2.0"
  std::string onednn;    // runtime oneDNN version, e.g. "2.6.0"
  std::string build_type;  // CMAKE_BUILD_TYPE (+ sanitizers, if any)

  // As metric / log labels, in a fixed order.
  std::vector<std::pair<std::string, std::string>> Labels() const;
  // "version=0.1.0 git_sha=... compiler=... onednn=... build_type=..."
  std::string ToString() const;
};

const BuildInfo& GetBuildInfo();

}  // namespace vocabd

#endif  // VOCABD_SERVER_BUILD_INFO_H_
