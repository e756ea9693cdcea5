// SequenceParallel: a module with replicated parameters (a norm) run on this
// rank's shard of the sequence dim. Its input is taken as Shard(sequence_dim)
// (as torch's SequenceParallel does with a plain tensor), or split locally when
// another style tagged it Replicate; its output stays sequence-sharded. The
// parameters see only this rank's tokens, so their gradients are partial sums
// and are all-reduced over tp in backward.
#pragma once

#include <cstdint>
#include <string>

#include "parallel/style.h"

namespace tessel::parallel {

class SequenceParallel : public Style {
 public:
  explicit SequenceParallel(int64_t sequence_dim = 1, std::string label = "SequenceParallel");
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;

 private:
  int64_t sequence_dim_;
  std::string label_;
};

}  // namespace tessel::parallel
