#include "io/confined_file.h"

#include <fmt/format.h>

#include <system_error>

#include "core/error.h"

namespace tessel::io {

namespace fs = std::filesystem;

std::string why_not_a_plain_file_name(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.find('\0') != std::string_view::npos) return "it contains a NUL byte";
  if (name.front() == '/') return "it is an absolute path";
  if (name == "." || name == "..") return fmt::format("'{}' is a directory, not a file", name);
  if (name.find('/') == std::string_view::npos) return "";
  // A path: say the worse thing it does.
  const fs::path path{std::string(name)};
  for (const auto& part : path) {
    if (part == "..") return "it climbs out of the directory with '..'";
  }
  return "it contains '/' (a file in another directory)";
}

std::string quoted_file_name(std::string_view name) {
  std::string out = "\"";
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\u{:04x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string why_outside(const fs::path& dir, std::string_view name, const fs::path& root) {
  if (std::string why = why_not_a_plain_file_name(name); !why.empty()) return why;
  const fs::path path = dir / std::string(name);
  std::error_code ec;
  // A plain name that is not a link is a file of `dir` (or nothing: the
  // reader says it is missing).
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return "";
  // Link by link, so that a link to a file that is not there (yet) is judged
  // by where it leads too: weakly_canonical alone stops at a dangling link.
  fs::path followed = path;
  for (int links = 0; fs::is_symlink(fs::symlink_status(followed, ec)); ++links) {
    if (links == 40) return "it is a symbolic link that cannot be followed (a loop of links)";
    const fs::path next = fs::read_symlink(followed, ec);
    if (ec) return fmt::format("it is a symbolic link that cannot be followed ({})", ec.message());
    followed = next.is_absolute() ? next : followed.parent_path() / next;
  }
  const fs::path target = fs::weakly_canonical(followed, ec);
  if (ec) return fmt::format("it is a symbolic link that cannot be followed ({})", ec.message());
  const fs::path inside = fs::weakly_canonical(root, ec);
  if (ec) return fmt::format("{} cannot be resolved ({})", root.string(), ec.message());
  const fs::path relative = target.lexically_relative(inside);
  if (relative == ".")
    return fmt::format("it is a symbolic link to the directory {} itself", target.string());
  if (relative.empty() || *relative.begin() == "..") {
    return fmt::format("it is a symbolic link to {}, outside {}", target.string(), inside.string());
  }
  return "";
}

fs::path confined_file(const fs::path& dir, std::string_view name, std::string_view where,
                       const fs::path& root) {
  const std::string why = why_outside(dir, name, root);
  if (why.empty()) return dir / std::string(name);
  throw UsageError(fmt::format(
      "{} names {}, which is not a file inside {}: {}. A checkpoint may name only files in its "
      "own directory, so tessel opens nothing it names elsewhere: restore the checkpoint from a "
      "copy you trust (copy links as files, e.g. cp -rL)",
      where, quoted_file_name(name), dir.string(), why));
}

}  // namespace tessel::io
