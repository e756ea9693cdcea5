#include "parallel/hf_styles.h"

#include <algorithm>

#include "config/suggest.h"
#include "core/error.h"
#include "parallel/colwise.h"
#include "parallel/replicate_styles.h"
#include "parallel/rowwise.h"
#include "parallel/sequence_parallel.h"
#include "parallel/vocab_parallel_embedding.h"

namespace tessel::parallel {

using tensor::Layout;

const std::vector<std::string>& supported_style_strings() {
  static const std::vector<std::string> names = {
      "colwise",        "rowwise",          "colwise_rep",   "colwise_gather_output",
      "rowwise_rep",    "rowwise_split_input", "sequence_parallel", "replicate",
      "replicated_with_grad_allreduce", "local_colwise", "local_rowwise", "local",
      "gather",         "embedding_rowwise", "packed_colwise", "packed_rowwise",
      "local_packed_rowwise"};
  return names;
}

bool is_hf_moe_style(const std::string& s) {
  // transformers 4.57 .. 5.x (shared/reference/hf_tp_plans.json, style_registry_by_version).
  static const std::vector<std::string> names = {"grouped_gemm",    "ep_router",       "megamoe_router",
                                                 "moe_tp_experts",  "megamoe_experts", "moe_identity_expert"};
  return std::find(names.begin(), names.end(), s) != names.end();
}

StylePtr style_from_string(const std::string& s, bool vocab_parallel_head) {
  auto colwise = [&](ColwiseOptions o) {
    o.label = s;
    return std::make_shared<ColwiseParallel>(std::move(o));
  };
  auto rowwise = [&](RowwiseOptions o) {
    o.label = s;
    return std::make_shared<RowwiseParallel>(std::move(o));
  };
  if (s == "colwise") return colwise({});
  if (s == "colwise_rep" || s == "colwise_gather_output") {
    ColwiseOptions o;
    if (!vocab_parallel_head) o.output_layout = Layout::replicate();
    return colwise(o);
  }
  if (s == "local_colwise") return colwise(ColwiseOptions{.local = true});
  if (s == "packed_colwise") return colwise(ColwiseOptions{.packed_parts = 2});
  // rowwise on an Embedding means vocab-parallel with replicated ids (rowwise.cpp).
  if (s == "rowwise") return rowwise({});
  if (s == "rowwise_rep" || s == "rowwise_split_input") return rowwise(RowwiseOptions{.input_layout = Layout::replicate()});
  if (s == "local_rowwise") return rowwise(RowwiseOptions{.local = true});
  if (s == "packed_rowwise") return rowwise(RowwiseOptions{.packed_parts = 2});
  if (s == "local_packed_rowwise") return rowwise(RowwiseOptions{.packed_parts = 2, .local = true});
  if (s == "embedding_rowwise") return std::make_shared<VocabParallelEmbedding>(Layout::replicate(), Layout::replicate(), s);
  if (s == "sequence_parallel") return std::make_shared<SequenceParallel>(1, s);
  if (s == "replicate") return std::make_shared<ReplicateParallel>(false, s);
  if (s == "replicated_with_grad_allreduce") return std::make_shared<ReplicateParallel>(true, s);
  if (s == "gather") return std::make_shared<GatherParallel>();
  if (s == "local") return std::make_shared<IsolatedParallel>();
  if (is_hf_moe_style(s)) {
    throw UsageError(fmt::format(
        "tensor-parallel style '{}' is a Hugging Face mixture-of-experts style (expert parallelism or MoE tensor "
        "parallelism), which tessel does not build yet: remove it from the plan; mixture-of-experts models train "
        "with tensor_parallel_size=1 and expert_parallel_size=1, their experts FSDP-sharded",
        s));
  }
  const auto& names = supported_style_strings();
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw UsageError(fmt::format("unknown tensor-parallel style '{}'.{} Supported styles: {}", s,
                               config::did_you_mean(config::closest_names(names, s)), list));
}

}  // namespace tessel::parallel
