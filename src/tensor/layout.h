// Layout: how one logical tensor is held by the ranks of one group (one mesh
// dimension), as in SPEC 3 and DTensor placements:
//   Replicate  every rank holds the whole tensor;
//   Shard(d)   rank r holds chunk r of dimension d (torch.chunk sizes, see
//              chunking.h; trailing chunks may be short or empty);
//   Partial    every rank holds a tensor of the full shape and the logical
//              value is their SUM.
// Shard(d) may use a negative d (counted from the end, Shard(-1) = last dim);
// normalized(ndim) resolves it for a concrete tensor. Equality compares the
// stored dim, so Shard(-1) != Shard(2) until both are normalized.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessel::tensor {

class Layout {
 public:
  enum class Kind { Replicate, Shard, Partial };

  static Layout replicate() { return Layout(Kind::Replicate, 0); }
  static Layout shard(int64_t dim) { return Layout(Kind::Shard, dim); }
  static Layout partial() { return Layout(Kind::Partial, 0); }
  // Parses what to_string prints ("Replicate", "Shard(1)", "Shard(-1)",
  // "Partial"); throws tessel::Error naming the accepted forms otherwise.
  static Layout parse(std::string_view text);

  Kind kind() const { return kind_; }
  bool is_replicate() const { return kind_ == Kind::Replicate; }
  bool is_shard() const { return kind_ == Kind::Shard; }
  bool is_partial() const { return kind_ == Kind::Partial; }
  // The sharded dimension; throws unless is_shard().
  int64_t dim() const;

  // Shard with a non-negative dim for a tensor of `ndim` dimensions (throws if
  // out of range); other layouts are returned unchanged.
  Layout normalized(int64_t ndim) const;

  std::string to_string() const;

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.kind_ == b.kind_ && a.dim_ == b.dim_;
  }
  friend bool operator!=(const Layout& a, const Layout& b) { return !(a == b); }

 private:
  Layout(Kind kind, int64_t dim) : kind_(kind), dim_(dim) {}
  Kind kind_;
  int64_t dim_;  // meaningful for Shard only; 0 otherwise so equality is exact
};

}  // namespace tessel::tensor
