// File names that come from a file's content, kept inside their directory.
//
// A checkpoint (a tessel step directory's metadata.json, a Hugging Face
// directory's model.safetensors.index.json) names the other files it is made
// of. A checkpoint is untrusted input: downloaded, shared between users,
// restored from storage. Nothing it says may make tessel open a file outside
// its directory, so every such name is checked here, one rule for every
// reader, before any file is opened:
//   - the name is a plain file name: not empty, no '/' (so not absolute and
//     no sub-directory), not "." or "..", no NUL byte (the system would cut
//     the name there and open another file than the one named);
//   - the file is inside the directory: when the name is a symbolic link, the
//     file it leads to (through every link) lies inside `root`, which is the
//     directory itself unless the caller widens it (a Hugging Face cache
//     snapshot's links lead into its repository's blobs/, hf_checkpoint.cpp).
// Paths a user gives (a config's checkpoint_dir, resume_from, model path,
// `defaults:` files, plan files) are not confined: the user chooses them.
//
// The check resolves links without opening anything; a file replaced by a
// link between the check and the read is not caught (the threat is the
// content of a checkpoint, not a process racing the reader).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace tessel::io {

// Why `name` is not a plain file name ("it contains '/'", ...), or "" when it is.
// Reads no file.
std::string why_not_a_plain_file_name(std::string_view name);

// `name` as JSON writes it, in double quotes with control characters escaped
// ("a\u0000b"): how a message shows a name exactly, whatever bytes it holds.
std::string quoted_file_name(std::string_view name);

// Why `dir / name` is not a file inside `root` (the name is not plain, or it
// is a link leading outside `root`), or "" when it is. A name that does not
// exist is inside (the reader then says it is missing). Opens nothing.
std::string why_outside(const std::filesystem::path& dir, std::string_view name,
                        const std::filesystem::path& root);

// `dir / name` once why_outside(dir, name, root) is "". Otherwise throws
// tessel::UsageError "<where> names <quoted name>, which is not a file inside
// <dir>: <why>. <remedy>": `where` says which file and entry named it.
std::filesystem::path confined_file(const std::filesystem::path& dir, std::string_view name,
                                    std::string_view where, const std::filesystem::path& root);
inline std::filesystem::path confined_file(const std::filesystem::path& dir, std::string_view name,
                                           std::string_view where) {
  return confined_file(dir, name, where, dir);
}

}  // namespace tessel::io
