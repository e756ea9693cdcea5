#include "tensor/box_map.h"

#include <algorithm>

#include "core/error.h"

namespace tessel::tensor {

int64_t BoxSegment::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

BoxMap whole_tensor_map(const std::vector<int64_t>& shape) {
  return {BoxSegment{std::vector<int64_t>(shape.size(), 0), std::vector<int64_t>(shape.size(), 0), shape}};
}

BoxMap narrow_local_rows(const BoxMap& map, int64_t begin, int64_t rows) {
  TESSEL_CHECK(begin >= 0 && rows >= 0, "box map: invalid row range [{}, {})", begin, begin + rows);
  BoxMap out;
  for (const BoxSegment& s : map) {
    if (s.shape.empty()) {  // a scalar has no rows to split: it goes whole to a non-empty range
      if (rows > 0) out.push_back(s);
      continue;
    }
    const int64_t lo = std::max(begin, s.local_offset[0]);
    const int64_t hi = std::min(begin + rows, s.local_offset[0] + s.shape[0]);
    if (hi <= lo) continue;
    BoxSegment cut = s;
    cut.global_offset[0] += lo - s.local_offset[0];
    cut.local_offset[0] = lo - begin;
    cut.shape[0] = hi - lo;
    out.push_back(std::move(cut));
  }
  return out;
}

std::optional<BoxOverlap> overlap(const BoxSegment& dst, const BoxSegment& src) {
  TESSEL_CHECK(dst.shape.size() == src.shape.size(), "box map: segments of {} and {} dimensions",
               dst.shape.size(), src.shape.size());
  BoxOverlap o;
  for (size_t d = 0; d < dst.shape.size(); ++d) {
    const int64_t lo = std::max(dst.global_offset[d], src.global_offset[d]);
    const int64_t hi = std::min(dst.global_offset[d] + dst.shape[d], src.global_offset[d] + src.shape[d]);
    if (hi <= lo) return std::nullopt;
    o.global_offset.push_back(lo);
    o.dst_offset.push_back(dst.local_offset[d] + lo - dst.global_offset[d]);
    o.src_offset.push_back(src.local_offset[d] + lo - src.global_offset[d]);
    o.shape.push_back(hi - lo);
  }
  return o;
}

int64_t map_numel(const BoxMap& map) {
  int64_t n = 0;
  for (const auto& s : map) n += s.numel();
  return n;
}

}  // namespace tessel::tensor
