// The closed form of expert parallelism's token exchange (cli/expert_traffic.h)
// on small cases counted by hand, and the expert index of parameter names.
#include <gtest/gtest.h>

#include "cli/expert_traffic.h"
#include "core/error.h"

namespace tessel::cli {
namespace {

TEST(ExpertTraffic, ExpertOfParameterNames) {
  EXPECT_EQ(expert_of("model.layers.3.mlp.experts.12.gate_proj.weight"), 12);
  EXPECT_EQ(expert_of("model.layers.0.block_sparse_moe.experts.0.w2.weight"), 0);
  EXPECT_EQ(expert_of("model.layers.0.block_sparse_moe.gate.weight"), -1);
  EXPECT_EQ(expert_of("model.layers.0.mlp.experts.weight"), -1);  // no index
  EXPECT_EQ(expert_of("model.embed_tokens.weight"), -1);
}

TEST(ExpertTraffic, BytesOfOneLayerCountedByHand) {
  // ep 4, 8 experts, hidden 3, fp32. One forward that sent 5 rows away and
  // got 2: counts 3 peers x 2 experts x 8 B = 48; rows out 5 x 12 B, results
  // back 2 x 12 B = 84; backward the rows again: 84.
  ExpertExchangeShape s;
  s.hidden = 3;
  s.num_experts = 8;
  s.ep = 4;
  EXPECT_EQ(expert_exchange_bytes(s, 1, 5, 2), 48 + 84 + 84);
  // Activation checkpointing re-runs the forward exchange, not the backward.
  s.activation_checkpointing = true;
  EXPECT_EQ(expert_exchange_bytes(s, 1, 5, 2), 2 * (48 + 84) + 84);
  // bf16 rows, three forwards.
  s.activation_checkpointing = false;
  s.activation_element_bytes = 2;
  EXPECT_EQ(expert_exchange_bytes(s, 3, 5, 2), 3 * 48 + 2 * 42);
  // Nothing to exchange with one rank.
  s.ep = 1;
  EXPECT_EQ(expert_exchange_bytes(s, 3, 0, 0), 0);
  s.ep = 3;
  EXPECT_THROW(expert_exchange_bytes(s, 1, 0, 0), Error);
}

TEST(ExpertTraffic, UniformRoutingSendsAllButTheOwnShare) {
  models::ModelConfig c;
  c.num_hidden_layers = 4;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.decoder_sparse_step = 2;  // layers 1 and 3 are sparse
  ExpertExchangeShape s;
  s.hidden = 8;
  s.num_experts = 4;
  s.ep = 2;
  // 2 micro batches of 10 tokens: 4 forwards, each 20 assignments of which 10 leave.
  const ExpertExchangeEstimate e = uniform_expert_exchange(c, s, 10, 2);
  EXPECT_EQ(sparse_layer_count(c), 2);
  EXPECT_EQ(e.forward_calls, 4);
  EXPECT_EQ(e.rows_off_rank, 40);
  EXPECT_EQ(e.bytes_per_rank, 4 * 1 * 2 * 8 + 2 * (80 * 8 * 4));
}

}  // namespace
}  // namespace tessel::cli
