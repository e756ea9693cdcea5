// A directory that appears whole or not at all: it is written under a hidden
// name beside its final one (<parent>/.<name>.partial) and renamed into place
// once complete, so a crash or an error mid-way never leaves something that
// looks like a finished result at the final name. How Hugging Face exports
// are written (`tessel convert`, checkpointing.save_consolidated). The final
// directory must be new: an existing one with entries is refused rather than
// merged into or replaced, so an export never mixes with or destroys other files.
#pragma once

#include <filesystem>
#include <string_view>

namespace tessel::io {

// tessel::UsageError "<what> <out> ..." when `out` exists and is not an empty
// directory (a file, or a directory with entries), saying to remove it or
// choose another; nothing otherwise. Reads only.
void check_new_directory(const std::filesystem::path& out, std::string_view what);

// <parent of out>/.<name of out>.partial
std::filesystem::path staging_directory(const std::filesystem::path& out);

// check_new_directory, then an empty staging directory for `out` (what an
// interrupted earlier attempt left there is removed; the parent is created).
std::filesystem::path begin_staging(const std::filesystem::path& out, std::string_view what);

// Makes `staging`'s entries durable and renames it to `out` (replacing an
// empty directory there), durably. tessel::Error when the rename fails.
void commit_staging(const std::filesystem::path& staging, const std::filesystem::path& out);

// Removes `staging` if it exists (after a failure); never throws.
void abandon_staging(const std::filesystem::path& staging) noexcept;

}  // namespace tessel::io
