// Resolving relative data paths (model files and folders) so vocabd and
// vocabctl find them from any working directory.
//
// A relative path is tried against, in order:
//   1. the current working directory (what the user typed, as before);
//   2. <dir of the running executable>/../share/vocabd   (`cmake --install`:
//      <prefix>/bin/vocabd -> <prefix>/share/vocabd/models/...);
//   3. <dir of the running executable>/..                 (the container:
//      /opt/vocabd/bin/vocabd -> /opt/vocabd/models/...);
//   4. <dir of the running executable>/../..              (a build tree in
//      the checkout: <repo>/build/server/vocabd -> <repo>/models/...).
// An absolute path is used as given. The result is absolute, so what a
// server reports (ModelInfo.source_files) is usable from any directory.
#ifndef VOCABD_LIB_CORE_DATA_PATH_H_
#define VOCABD_LIB_CORE_DATA_PATH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd {

// The directories above for the running executable (read from
// /proc/self/exe; only the working directory if that cannot be read).
std::vector<std::string> DefaultDataSearchDirs();

// The absolute path of the first existing `dir/path` (file or folder), or
// `path` itself made absolute when it is absolute or found in the working
// directory. NOT_FOUND names `what` (e.g. "model 'stories260K'"), the path
// as given and every path tried. INVALID_ARGUMENT for an empty path.
absl::StatusOr<std::string> ResolveDataPath(const std::string& path, const std::string& what,
                                            const std::vector<std::string>& search_dirs =
                                                DefaultDataSearchDirs());

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_DATA_PATH_H_
