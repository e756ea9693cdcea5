#include "parallel/expert_parallel.h"

#include "core/error.h"

namespace tessel::parallel {

std::vector<std::shared_ptr<nn::SparseMoeBlock>> sparse_moe_blocks(nn::Module& root) {
  std::vector<std::shared_ptr<nn::SparseMoeBlock>> blocks;
  for (const auto& m : root.modules(/*include_self=*/false)) {
    if (auto block = std::dynamic_pointer_cast<nn::SparseMoeBlock>(m)) blocks.push_back(std::move(block));
  }
  return blocks;
}

std::map<std::string, std::vector<int64_t>> apply_expert_parallel(nn::Module& root, const dist::CommunicatorPtr& ep,
                                               std::shared_ptr<ExpertDispatchStats> stats) {
  TESSEL_CHECK(ep != nullptr, "apply_expert_parallel: the ep communicator is null");
  std::map<std::string, std::vector<int64_t>> before;
  for (const auto& item : root.named_parameters()) before.emplace(item.key(), item.value().sizes().vec());
  for (const auto& block : sparse_moe_blocks(root)) {
    const int64_t experts = block->options().num_experts;
    TESSEL_CHECK(experts % ep->size() == 0, "{} experts do not split over the ep group '{}' of {} ranks", experts,
                 ep->name(), ep->size());
    const int64_t local = experts / ep->size();
    block->keep_experts(ep->rank() * local, local,
                        [ep, experts, stats](const at::Tensor& tokens, const nn::Routing& routing,
                                             const std::function<at::Tensor(int64_t, const at::Tensor&)>& run) {
                          return dispatch_to_experts(tokens, routing.chosen, routing.weights, experts, ep, run,
                                                     stats.get());
                        });
  }
  nn::assign_module_paths(root);
  for (const auto& item : root.named_parameters()) before.erase(item.key());
  return before;
}

}  // namespace tessel::parallel
