#include "cli/expert_traffic.h"

#include <cctype>

#include "core/error.h"

namespace tessel::cli {

int64_t expert_exchange_bytes(const ExpertExchangeShape& shape, int64_t forward_calls, int64_t rows_sent,
                              int64_t rows_received) {
  TESSEL_CHECK(shape.ep >= 1 && shape.num_experts % shape.ep == 0,
               "expert_exchange_bytes: {} experts do not split over ep {}", shape.num_experts, shape.ep);
  if (shape.ep == 1) return 0;
  const int64_t counts = forward_calls * (shape.ep - 1) * (shape.num_experts / shape.ep) * 8;
  const int64_t rows = (rows_sent + rows_received) * shape.hidden * shape.activation_element_bytes;
  const int forwards = shape.activation_checkpointing ? 2 : 1;
  return forwards * (counts + rows) + rows;  // + rows: the backward's reverse exchanges
}

int64_t expert_of(const std::string& param_name) {
  static const std::string kExperts = ".experts.";
  const auto at = param_name.find(kExperts);
  if (at == std::string::npos) return -1;
  int64_t e = 0;
  size_t i = at + kExperts.size();
  if (i >= param_name.size() || !std::isdigit(static_cast<unsigned char>(param_name[i]))) return -1;
  for (; i < param_name.size() && std::isdigit(static_cast<unsigned char>(param_name[i])); ++i) {
    e = e * 10 + (param_name[i] - '0');
  }
  return e;
}

int64_t sparse_layer_count(const models::ModelConfig& config) {
  int64_t n = 0;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) n += models::is_moe_layer(config, layer);
  return n;
}

ExpertExchangeEstimate uniform_expert_exchange(const models::ModelConfig& config, const ExpertExchangeShape& shape,
                                               int64_t tokens_per_micro_batch, int64_t micro_batches) {
  ExpertExchangeEstimate e;
  e.forward_calls = sparse_layer_count(config) * micro_batches;
  const int64_t assignments = tokens_per_micro_batch * config.num_experts_per_tok;
  // (ep-1)/ep of the assignments leave; rounded to whole rows per layer call.
  e.rows_off_rank = e.forward_calls * ((assignments * (shape.ep - 1) + shape.ep / 2) / shape.ep);
  e.bytes_per_rank = expert_exchange_bytes(shape, e.forward_calls, e.rows_off_rank, e.rows_off_rank);
  return e;
}

}  // namespace tessel::cli
