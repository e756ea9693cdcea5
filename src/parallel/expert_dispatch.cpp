#include "parallel/expert_dispatch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "tensor/all_to_all_rows.h"

namespace tessel::parallel {

at::Tensor dispatch_to_experts(const at::Tensor& tokens, const at::Tensor& chosen, const at::Tensor& weights,
                               int64_t num_experts, const dist::CommunicatorPtr& group,
                               const LocalExpert& run_expert, ExpertDispatchStats* stats) {
  TESSEL_CHECK(group != nullptr, "dispatch_to_experts: the ep communicator is null");
  const int64_t ep = group->size(), me = group->rank(), k = chosen.size(1);
  TESSEL_CHECK(num_experts % ep == 0, "dispatch_to_experts: {} experts do not split over ep group '{}' of {} ranks",
               num_experts, group->name(), ep);
  const int64_t local = num_experts / ep;

  // Assignments sorted by expert: the rows for rank j are then one run.
  const at::Tensor flat_expert = chosen.flatten();
  const at::Tensor order = std::get<1>(at::sort(flat_expert, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor token_of = at::div(order, k, "floor");
  const at::Tensor weight_of = weights.flatten().index_select(0, order).unsqueeze(1);
  const at::Tensor per_expert = at::bincount(flat_expert, {}, num_experts).to(at::kCPU);  // [E]

  // 1. Counts: per_expert viewed [ep, local] goes row j to rank j; rank me
  //    receives [ep, local]: row r = how many rows source r sends each local expert.
  const std::vector<int64_t> mine(per_expert.data_ptr<int64_t>(), per_expert.data_ptr<int64_t>() + num_experts);
  at::Tensor incoming = at::empty({ep, local}, at::kLong);
  group->all_to_all(incoming, per_expert.contiguous());
  const auto in_acc = incoming.accessor<int64_t, 2>();
  std::vector<int64_t> send_counts(static_cast<size_t>(ep)), recv_counts(static_cast<size_t>(ep));
  for (int64_t j = 0; j < ep; ++j) {
    for (int64_t e = 0; e < local; ++e) {
      send_counts[j] += mine[static_cast<size_t>(j * local + e)];
      recv_counts[j] += in_acc[j][e];
    }
  }

  // 2. The rows to their experts' ranks.
  const at::Tensor received = tensor::all_to_all_rows(tokens.index_select(0, token_of), group, send_counts,
                                                      recv_counts);

  // 3. Received rows come grouped by source, then by expert; regroup them
  //    by expert (source order inside) to run each expert once.
  std::vector<int64_t> by_expert;  // position in `received` of each row, expert-major
  by_expert.reserve(static_cast<size_t>(received.size(0)));
  std::vector<int64_t> source_start(static_cast<size_t>(ep));
  for (int64_t r = 1; r < ep; ++r) source_start[r] = source_start[r - 1] + recv_counts[r - 1];
  std::vector<int64_t> rows_of(static_cast<size_t>(local));
  for (int64_t e = 0; e < local; ++e) {
    for (int64_t r = 0; r < ep; ++r) {
      int64_t at = source_start[r];
      for (int64_t f = 0; f < e; ++f) at += in_acc[r][f];
      for (int64_t i = 0; i < in_acc[r][e]; ++i) by_expert.push_back(at + i);
      rows_of[e] += in_acc[r][e];
    }
  }
  const at::Tensor regroup = at::tensor(by_expert, at::kLong).to(received.device());
  const at::Tensor grouped = received.index_select(0, regroup);
  std::vector<at::Tensor> outputs;
  int64_t begin = 0;
  for (int64_t e = 0; e < local; ++e) {
    outputs.push_back(run_expert(e, grouped.narrow(0, begin, rows_of[e])));
    begin += rows_of[e];
  }
  // Back to the received order (inverse of `regroup`), so the reverse
  // exchange returns each source its rows in the order it sent them.
  const at::Tensor expert_out = at::cat(outputs).index_select(0, at::argsort(regroup));

  // 4. Back to the tokens' ranks, weighted, summed per token.
  const at::Tensor returned = tensor::all_to_all_rows(expert_out, group, recv_counts, send_counts);
  if (stats) {
    stats->rows_sent += std::accumulate(send_counts.begin(), send_counts.end(), int64_t{0}) - send_counts[me];
    stats->rows_received += std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0}) - recv_counts[me];
    stats->experts_without_tokens += std::count(mine.begin(), mine.end(), int64_t{0});
  }
  return at::zeros_like(tokens).index_add(0, token_of, returned * weight_of);
}

}  // namespace tessel::parallel
