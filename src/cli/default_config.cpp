#include "cli/default_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "config/loader.h"
#include "core/error.h"

namespace tessel::cli {

namespace fs = std::filesystem;

namespace {

const fs::path kRelative = fs::path("examples") / "configs" / "sft.yaml";

std::optional<fs::path> search_upward(fs::path dir) {
  std::error_code ec;
  while (!dir.empty()) {
    if (fs::is_regular_file(dir / kRelative, ec)) return dir / kRelative;
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::nullopt;
}

}  // namespace

fs::path default_config_path() {
  std::vector<std::string> searched;
  std::error_code ec;
  if (const char* src = std::getenv("TESSEL_SOURCE_DIR"); src != nullptr && *src != '\0') {
    const fs::path candidate = fs::path(src) / kRelative;
    if (fs::is_regular_file(candidate, ec)) return candidate;
    searched.push_back(candidate.string());
  }
  const fs::path cwd = fs::current_path(ec);
  if (!ec) {
    if (auto found = search_upward(cwd)) return *found;
    searched.push_back(fmt::format("{} and its parents", (cwd / kRelative).string()));
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (auto found = search_upward(exe.parent_path())) return *found;
    searched.push_back(fmt::format("{}/... upward from the tessel binary", kRelative.string()));
  }
  throw UsageError(fmt::format("no config file given and the default {} was not found "
                               "(searched: {}); pass a config path as the first argument, or set "
                               "TESSEL_SOURCE_DIR to the tessel source tree",
                               kRelative.string(), fmt::join(searched, "; ")));
}

ConfigArgs split_config_args(std::vector<std::string> positional) {
  const auto is_override = [](const std::string& arg) {
    return arg.find('=') != std::string::npos || arg.rfind('+', 0) == 0 || arg.rfind('~', 0) == 0;
  };
  ConfigArgs out;
  if (!positional.empty() && !is_override(positional.front())) {
    out.path = positional.front();
    positional.erase(positional.begin());
  }
  out.overrides = std::move(positional);
  return out;
}

config::Config model_command_config(const std::vector<std::string>& model_and_overrides, int64_t init_seed) {
  std::vector<std::string> overrides = {"policy.model_name=" + model_and_overrides.front()};
  if (init_seed >= 0) overrides.push_back(fmt::format("sft.seed={}", init_seed));
  overrides.insert(overrides.end(), model_and_overrides.begin() + 1, model_and_overrides.end());
  return config::load_config(default_config_path(), overrides);
}

}  // namespace tessel::cli
