#include "core/edit_distance.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessel {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

size_t edit_distance_within(std::string_view a, std::string_view b, size_t limit) {
  if (a.size() > b.size()) std::swap(a, b);
  const size_t beyond = limit + 1;
  if (b.size() - a.size() > limit) return beyond;  // every alignment needs that many inserts
  // Only cells within `limit` of the diagonal can stay within the limit;
  // cells outside the band read as `beyond`.
  std::vector<size_t> prev(b.size() + 1, beyond), cur(b.size() + 1, beyond);
  for (size_t j = 0; j <= std::min(b.size(), limit); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    const size_t lo = i > limit ? i - limit : 1;
    const size_t hi = std::min(b.size(), i + limit);
    cur[lo - 1] = lo == 1 ? std::min(i, beyond) : beyond;
    size_t row_min = cur[lo - 1];
    for (size_t j = lo; j <= hi; ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst, beyond});
      row_min = std::min(row_min, cur[j]);
    }
    if (hi < b.size()) cur[hi + 1] = beyond;  // the next row's band reaches one further
    if (row_min >= beyond) return beyond;     // no alignment gets back under the limit
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace tessel
