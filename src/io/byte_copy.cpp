#include "io/byte_copy.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

namespace tessel::io {
namespace {

// Below this a copy is not worth waking other threads for.
constexpr uint64_t kGrainBytes = uint64_t{4} << 20;

}  // namespace

void copy_rows(std::byte* dst, const std::byte* src, uint64_t rows, uint64_t chunk,
               uint64_t src_stride) {
  if (rows == 0 || chunk == 0) return;
  if (rows == 1 || chunk == src_stride) {
    // One contiguous range: split it into pieces, one memcpy each.
    const auto total = static_cast<int64_t>(rows * chunk);
    at::parallel_for(0, total, static_cast<int64_t>(kGrainBytes), [&](int64_t begin, int64_t end) {
      std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
    });
    return;
  }
  const auto grain = static_cast<int64_t>(std::max<uint64_t>(1, kGrainBytes / chunk));
  at::parallel_for(0, static_cast<int64_t>(rows), grain, [&](int64_t begin, int64_t end) {
    for (auto r = static_cast<uint64_t>(begin); r < static_cast<uint64_t>(end); ++r) {
      std::memcpy(dst + r * chunk, src + r * src_stride, chunk);
    }
  });
}

}  // namespace tessel::io
