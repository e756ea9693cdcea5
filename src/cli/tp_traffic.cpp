#include "cli/tp_traffic.h"

#include "core/error.h"

namespace tessel::cli {

namespace {

int64_t count_where(const TpCollectives& c, bool forward) {
  int64_t n = 0;
  for (const auto& a : c.all_reduces) n += a.forward == forward;
  for (const auto& e : c.to_each_peer) n += e.forward == forward;
  return n;
}

}  // namespace

int64_t TpCollectives::forward_count() const { return count_where(*this, true); }
int64_t TpCollectives::backward_count() const { return count_where(*this, false); }

TpCollectives tp_collectives(const models::ModelConfig& model, TpPlanForm form, const TpStepShape& s,
                             const std::vector<int64_t>& whole_param_grads) {
  TpCollectives out;
  if (s.tp < 2 || form == TpPlanForm::NotModelled) return out;
  const int64_t layers = model.num_hidden_layers;
  int64_t split_mlps = 0;
  for (int64_t i = 0; i < layers; ++i) split_mlps += !models::is_moe_layer(model, i);
  const int64_t tokens = s.rows * s.tokens_per_row;
  const int64_t activation = tokens * model.hidden_size;  // elements of [rows, tokens, H]
  const int64_t blocks = layers + split_mlps;              // attention and split MLP blocks
  // The recomputation repeats each layer's forward collectives in backward.
  const int64_t layer_forwards = s.activation_checkpointing ? 2 : 1;
  auto all_reduce = [&](int64_t numel, int64_t element_size, bool forward, int64_t times) {
    for (int64_t i = 0; i < times; ++i) out.all_reduces.push_back({numel, element_size, forward});
  };
  auto to_each_peer = [&](int64_t bytes, bool forward, int64_t times) {
    for (int64_t i = 0; i < times; ++i) out.to_each_peer.push_back({bytes, forward});
  };
  const int64_t e = s.activation_element_bytes;
  if (form == TpPlanForm::Optimized) {
    all_reduce(activation, e, true, 1);           // the embedding's output
    all_reduce(activation, e, true, blocks);      // each block's output
    all_reduce(activation, e, false, blocks);     // each block's input gradient
    all_reduce(activation, e, false, 1);          // the head's input gradient
    if (s.activation_checkpointing) all_reduce(activation, e, false, blocks);
  } else {
    TESSEL_CHECK(split_mlps == layers, "sequence parallelism over mixture-of-experts layers is not built");
    TESSEL_CHECK(s.tokens_per_row % s.tp == 0, "sequence parallelism needs tokens per row ({}) divisible by tp {}",
                 s.tokens_per_row, s.tp);
    const int64_t shard = activation / s.tp * e;  // [rows, tokens / tp, H]
    for (int64_t pass = 0; pass < layer_forwards; ++pass) {
      const bool forward = pass == 0;
      to_each_peer(shard, forward, 2 * layers);  // all-gathers of the attention's and the MLP's inputs
      to_each_peer(shard, forward, 2 * layers);  // reduce-scatters of their outputs
      to_each_peer(8, forward, 2 * layers);      // the shard sizes (int64) of the blocks' inputs
    }
    to_each_peer(8, true, 1);                // ... and of the head's
    to_each_peer(shard, false, 4 * layers);  // the adjoints
    to_each_peer(shard, true, 2);            // the embedding's reduce-scatter, the head's all-gather
    to_each_peer(shard, false, 2);           // their adjoints
  }
  // The vocab-parallel loss: the rows' maxima, then their exp-sums and target logits.
  all_reduce(tokens, 4, true, 1);
  all_reduce(2 * tokens, 4, true, 1);
  for (int64_t numel : whole_param_grads) all_reduce(numel, e, false, 1);
  return out;
}

}  // namespace tessel::cli
