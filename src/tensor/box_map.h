// BoxMap: which parts of a global tensor a rank's local tensor holds, and
// where in the local tensor each part sits. A ShardSpec's nested placements
// give one box (tensor/shard_spec.h), but a packed (fused gate||up) weight
// split over tp is several boxes side by side, and FSDP's rows of such a
// piece may cross from one box into the next. A BoxMap is the general form:
// a list of segments, each a box of the global tensor and the equal-shaped
// box of the local tensor that holds the same elements.
//
// Sharded loading is built on it (train/shard_loading.h): the rows a rank
// must fill (its BoxMap) are intersected with what each source holds (a whole
// tensor of a Hugging Face file: one segment covering it; a rank file of a
// training checkpoint: the saving rank's BoxMap) and only the overlaps are
// read, so no rank ever materialises a whole tensor it does not own.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::tensor {

struct BoxSegment {
  std::vector<int64_t> global_offset;  // where the box starts in the global tensor
  std::vector<int64_t> local_offset;   // where the same elements start in the local tensor
  std::vector<int64_t> shape;          // extent of the box (may hold zeros: empty)
  int64_t numel() const;
};

using BoxMap = std::vector<BoxSegment>;

// The whole tensor of `shape`, held whole (one segment, local == global).
BoxMap whole_tensor_map(const std::vector<int64_t>& shape);

// `map` restricted to local rows [begin, begin + rows) of dim 0, with local
// offsets shifted so the result describes a tensor of those rows alone: FSDP's
// dim-0 chunk of a tp piece. Segments that fall outside are dropped.
BoxMap narrow_local_rows(const BoxMap& map, int64_t begin, int64_t rows);

// Where a segment of a destination and one of a source hold the same global
// elements: the common global box, and its offsets in each local tensor.
struct BoxOverlap {
  std::vector<int64_t> global_offset;
  std::vector<int64_t> dst_offset;
  std::vector<int64_t> src_offset;
  std::vector<int64_t> shape;
};

// Nullopt when the boxes share no element.
std::optional<BoxOverlap> overlap(const BoxSegment& dst, const BoxSegment& src);

// Elements of all segments (each global element is held once per map).
int64_t map_numel(const BoxMap& map);

}  // namespace tessel::tensor
