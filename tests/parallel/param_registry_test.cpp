// A tp piece's place in the full tensor (local_piece_map) holds exactly what
// local_piece cuts out: plain and packed (fused gate||up) weights, split on
// either dim, over tp sizes that do and do not divide them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "parallel/param_registry.h"

namespace tessel::parallel {
namespace {

TEST(ParamRegistry, PieceMapHoldsWhatLocalPieceCuts) {
  const at::Tensor full = at::arange(12 * 10, at::kFloat).reshape({12, 10});
  for (int64_t dim : {0, 1}) {
    for (int parts : {1, 2}) {
      for (int tp : {2, 3, 4}) {
        const TpParam param{tensor::ShardSpec({12, 10}, {{kTpMeshDim, tensor::Layout::shard(dim)}}), parts, "test"};
        for (int r = 0; r < tp; ++r) {
          const at::Tensor want = local_piece(full, param, tp, r);
          ASSERT_EQ(want.sizes().vec(), local_piece_shape(param, tp, r));
          at::Tensor got = at::full(want.sizes(), -1.0);
          for (const auto& s : local_piece_map(param, tp, r)) {
            at::Tensor dst = got, src = full;
            for (size_t d = 0; d < s.shape.size(); ++d) {
              dst = dst.narrow(static_cast<int64_t>(d), s.local_offset[d], s.shape[d]);
              src = src.narrow(static_cast<int64_t>(d), s.global_offset[d], s.shape[d]);
            }
            dst.copy_(src);
          }
          EXPECT_TRUE(got.equal(want)) << "dim " << dim << " parts " << parts << " tp " << tp << " rank " << r;
        }
      }
    }
  }
  const TpParam whole{tensor::ShardSpec({12, 10}, {{kTpMeshDim, tensor::Layout::replicate()}}), 1, "test"};
  EXPECT_EQ(tensor::map_numel(local_piece_map(whole, 2, 1)), 120);
}

}  // namespace
}  // namespace tessel::parallel
