#include "lib/core/data_path.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vocabd {

namespace fs = std::filesystem;

std::vector<std::string> DefaultDataSearchDirs() {
  std::error_code ec;
  std::vector<std::string> dirs;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) dirs.push_back(cwd.string());
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path()) {
    const fs::path bin = exe.parent_path();
    for (const fs::path& d : {bin / ".." / "share" / "vocabd", bin / "..", bin / ".." / ".."}) {
      dirs.push_back(d.lexically_normal().string());
    }
  }
  return dirs;
}

absl::StatusOr<std::string> ResolveDataPath(const std::string& path, const std::string& what,
                                            const std::vector<std::string>& search_dirs) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty path"));
  std::error_code ec;
  const fs::path p(path);
  std::vector<std::string> tried;
  if (p.is_absolute()) {
    if (fs::exists(p, ec)) return p.lexically_normal().string();
    tried.push_back(p.string());
  } else {
    for (const std::string& dir : search_dirs) {
      const fs::path candidate = (fs::path(dir) / p).lexically_normal();
      if (std::find(tried.begin(), tried.end(), candidate.string()) != tried.end()) continue;
      if (fs::exists(candidate, ec)) return fs::absolute(candidate, ec).string();
      tried.push_back(candidate.string());
    }
  }
  return absl::NotFoundError(absl::StrCat(what, " path ", path, " does not exist (tried ",
                                          absl::StrJoin(tried, ", "), ")"));
}

}  // namespace vocabd
