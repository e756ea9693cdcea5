// metadata.json of a training checkpoint's step directory, whole: the
// "files" manifest and the rest (train/checkpoint_metadata.h). Besides
// refusing only with tessel::Error, what the parser accepts must be what the
// loader relies on: every file name a plain name inside the step directory,
// tp_size dividing world_size, every parameter split over tp a recorded
// shape with a dim and packed parts it has. The list alone (what the check
// before a load reads) gets the same input.
#include <string>

#include "fuzz_input.h"
#include "io/confined_file.h"
#include "train/checkpoint_metadata.h"

namespace {

void expect_plain_names(const tessel::train::CheckpointManifest& files) {
  for (const auto& [name, digest] : files) {
    if (!tessel::io::why_not_a_plain_file_name(name).empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tessel::fuzz::expect_only_tessel_errors([&] {
    const auto meta = tessel::train::parse_checkpoint_metadata(text, "fuzz/metadata.json");
    if (meta.files) expect_plain_names(*meta.files);
    if (meta.world_size < 1 || meta.tp_size < 1 || meta.world_size % meta.tp_size != 0)
      std::abort();
    for (const auto& [name, shape] : meta.shapes) {
      for (const int64_t d : shape) {
        if (d < 0) std::abort();
      }
    }
    for (const auto& [name, split] : meta.tp_sharded) {
      const auto shape = meta.shapes.find(name);
      if (shape == meta.shapes.end() || split.dim < 0 ||
          split.dim >= static_cast<int64_t>(shape->second.size()) || split.packed_parts < 1 ||
          shape->second[static_cast<size_t>(split.dim)] % split.packed_parts != 0) {
        std::abort();
      }
    }
    if (meta.files) (void)tessel::train::manifest_to_json(*meta.files);
  });
  tessel::fuzz::expect_only_tessel_errors([&] {
    const auto files = tessel::train::manifest_of_metadata(text, "fuzz/metadata.json");
    if (files) expect_plain_names(*files);
  });
  return 0;
}
