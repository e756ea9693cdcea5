#include "io/staged_directory.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "core/error.h"
#include "io/atomic_file.h"

namespace tessel::io {

namespace fs = std::filesystem;

void check_new_directory(const fs::path& out, std::string_view what) {
  std::error_code ec;
  const auto status = fs::symlink_status(out, ec);
  if (ec || !fs::exists(status)) return;
  if (!fs::is_directory(fs::status(out, ec))) {
    throw UsageError(fmt::format("{} {} exists and is not a directory; choose a new directory", what, out.string()));
  }
  if (!fs::is_empty(out, ec)) {
    throw UsageError(fmt::format("{} {} exists and is not empty; remove it or choose a new directory (an export "
                                 "never writes into or replaces existing files)",
                                 what, out.string()));
  }
}

fs::path staging_directory(const fs::path& out) {
  const fs::path clean = out.has_filename() ? out : out.parent_path();
  return clean.parent_path() / ("." + clean.filename().string() + ".partial");
}

fs::path begin_staging(const fs::path& out, std::string_view what) {
  check_new_directory(out, what);
  const fs::path staging = staging_directory(out);
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the directory to write into: {}", staging.string(), ec.message()));
  return staging;
}

void commit_staging(const fs::path& staging, const fs::path& out) {
  sync_directory(staging);
  // rename(2) replaces an empty directory; one with entries appeared since
  // the check and is refused by the system (ENOTEMPTY), not overwritten.
  const fs::path target = out.has_filename() ? out : out.parent_path();
  if (std::rename(staging.c_str(), target.c_str()) != 0) {
    throw Error(fmt::format("cannot rename {} to {}: {}", staging.string(), target.string(), std::strerror(errno)));
  }
  sync_directory(target.parent_path());
}

void abandon_staging(const fs::path& staging) noexcept {
  std::error_code ec;
  fs::remove_all(staging, ec);
}

}  // namespace tessel::io
