#include "tensor/layout.h"

#include <charconv>

#include "core/error.h"

namespace tessel::tensor {

int64_t Layout::dim() const {
  TESSEL_CHECK(is_shard(), "layout {} has no sharded dimension", to_string());
  return dim_;
}

Layout Layout::normalized(int64_t ndim) const {
  if (!is_shard()) return *this;
  TESSEL_CHECK(dim_ >= -ndim && dim_ < ndim,
               "layout {} does not fit a tensor with {} dimensions (valid dims: {}..{})",
               to_string(), ndim, -ndim, ndim - 1);
  return shard(dim_ < 0 ? dim_ + ndim : dim_);
}

std::string Layout::to_string() const {
  switch (kind_) {
    case Kind::Replicate:
      return "Replicate";
    case Kind::Partial:
      return "Partial";
    case Kind::Shard:
      return fmt::format("Shard({})", dim_);
  }
  return "?";
}

Layout Layout::parse(std::string_view text) {
  if (text == "Replicate") return replicate();
  if (text == "Partial") return partial();
  constexpr std::string_view prefix = "Shard(";
  if (text.size() > prefix.size() + 1 && text.substr(0, prefix.size()) == prefix &&
      text.back() == ')') {
    const std::string_view digits = text.substr(prefix.size(), text.size() - prefix.size() - 1);
    int64_t dim = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), dim);
    if (ec == std::errc() && end == digits.data() + digits.size()) return shard(dim);
  }
  throw Error(fmt::format(
      "unknown layout '{}': expected Replicate, Partial or Shard(<dim>) such as Shard(0) or Shard(-1)",
      text));
}

}  // namespace tessel::tensor
