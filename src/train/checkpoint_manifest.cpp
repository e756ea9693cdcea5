#include "train/checkpoint_manifest.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <fstream>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "io/confined_file.h"
#include "io/xxhash64.h"
#include "train/checkpoint.h"

namespace tessel::train {

namespace fs = std::filesystem;

namespace {

// The newest complete step before `step_dir`'s in the same directory.
std::optional<fs::path> previous_checkpoint(const fs::path& step_dir) {
  std::optional<fs::path> best;
  int64_t step = -1;
  try {
    step = checkpoint_step(step_dir);
  } catch (const Error&) {
    return std::nullopt;  // not a step_<N> name: no order to go back in
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(step_dir.parent_path(), ec)) {
    if (!e.is_directory() || !fs::is_regular_file(e.path() / "metadata.json")) continue;
    int64_t other = -1;
    try {
      other = checkpoint_step(e.path());
    } catch (const Error&) {
      continue;
    }
    if (other < step && (!best || other > checkpoint_step(*best))) best = e.path();
  }
  return best;
}

// "checkpoint <step_dir> is damaged: <problem>. <remedy>".
[[noreturn]] void throw_damaged(const fs::path& step_dir, const std::string& problem) {
  const auto previous = previous_checkpoint(step_dir);
  const std::string remedy =
      previous ? fmt::format("Resume from the previous checkpoint: add "
                             "++checkpointing.resume_from={} to the command line (or set "
                             "checkpointing.resume_from in the config); the damaged step is "
                             "written again when the run reaches it",
                             previous->string())
               : fmt::format("There is no earlier complete checkpoint in {}: restore the file "
                             "from a copy, or start afresh with another "
                             "checkpointing.checkpoint_dir",
                             step_dir.parent_path().string());
  throw UsageError(
      fmt::format("checkpoint {} is damaged: {}. {}", step_dir.string(), problem, remedy));
}

[[noreturn]] void throw_damaged(const fs::path& step_dir, const std::string& file,
                                const std::string& what) {
  throw_damaged(step_dir, fmt::format("{} {}", (step_dir / file).string(), what));
}

// The manifest of `step_dir` (empty for a checkpoint saved without one),
// every name checked to lead inside `step_dir` before any file is opened.
CheckpointManifest read_manifest(const fs::path& step_dir) {
  const fs::path path =
      io::confined_file(step_dir, "metadata.json", fmt::format("checkpoint {}", step_dir.string()));
  std::ifstream in(path);
  if (!in) throw_damaged(step_dir, "metadata.json", "cannot be read");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::optional<CheckpointManifest> manifest;
  try {
    manifest = manifest_of_metadata(text, path.string());
  } catch (const UsageError& e) {
    throw_damaged(step_dir, e.what());
  }
  if (!manifest) return {};
  for (const auto& [name, digest] : *manifest) {
    if (const std::string why = io::why_outside(step_dir, name, step_dir); !why.empty()) {
      throw_damaged(step_dir,
                    fmt::format("{}: \"files\" names {}, which is not a file inside {}: {}",
                                path.string(), io::quoted_file_name(name), step_dir.string(), why));
    }
  }
  return *manifest;
}

void verify_file(const fs::path& step_dir, const std::string& name, const io::FileDigest& saved) {
  const fs::path path = step_dir / name;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw_damaged(step_dir, name, "is missing");
  const io::FileDigest now = io::digest_file(path);
  if (now.bytes != saved.bytes) {
    throw_damaged(step_dir, name,
                  fmt::format("holds {} bytes but the save wrote {}{}", now.bytes, saved.bytes,
                              now.bytes < saved.bytes ? " (truncated)" : ""));
  }
  if (now.xxh64 != saved.xxh64) {
    throw_damaged(step_dir, name,
                  fmt::format("has xxHash64 {} but the save wrote {}: its content changed "
                              "after the save",
                              io::hash_hex(now.xxh64), io::hash_hex(saved.xxh64)));
  }
}

}  // namespace

// A checkpoint written before tessel recorded file sizes and checksums has
// nothing to verify against: say so rather than pass it as checked.
void warn_if_unverifiable(const fs::path& step_dir, const CheckpointManifest& manifest) {
  if (!manifest.empty()) return;
  log::warn("checkpoint {} lists no file sizes or checksums (saved by an older tessel): loading it unverified",
            step_dir.string());
}

void verify_checkpoint(const fs::path& step_dir) {
  const CheckpointManifest manifest = read_manifest(step_dir);
  warn_if_unverifiable(step_dir, manifest);
  for (const auto& [name, saved] : manifest) verify_file(step_dir, name, saved);
}

void verify_checkpoint(const fs::path& step_dir, dist::Communicator& world) {
  // Every rank reads the same metadata.json, so all agree on the list (or
  // all throw the same error here, with no collective pending).
  const CheckpointManifest manifest = read_manifest(step_dir);
  if (world.rank() == 0) warn_if_unverifiable(step_dir, manifest);
  const std::vector<std::pair<std::string, io::FileDigest>> files(manifest.begin(),
                                                                  manifest.end());
  const int64_t n = static_cast<int64_t>(files.size());
  // Rank r reads files r, r + world, ...; what is reduced is n - (first bad
  // index), so the maximum names the first damaged file, and 0 none.
  int64_t worst = 0;
  for (int64_t i = world.rank(); i < n && worst == 0; i += world.size()) {
    try {
      verify_file(step_dir, files[i].first, files[i].second);
    } catch (const UsageError&) {
      worst = n - i;
    }
  }
  at::Tensor flag = at::full({1}, worst, at::kLong);
  world.all_reduce(flag, dist::ReduceOp::Max);
  worst = flag.item<int64_t>();
  if (worst == 0) return;
  // Each rank checks the damaged file again itself, so they all throw the
  // same UsageError naming it and end alike (none goes on to load).
  const auto& [name, saved] = files[n - worst];
  verify_file(step_dir, name, saved);
  throw_damaged(step_dir, name, "did not read back as saved on another rank");
}

}  // namespace tessel::train
