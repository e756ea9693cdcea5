#include "policy/policy_batch.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "nn/format.h"
#include "tensor/autograd_collectives.h"
#include "train/step_objective.h"

namespace tessel::policy {

at::Tensor token_value(const train::MicroBatch& batch, const char* name) {
  const auto it = batch.token_values.find(name);
  TESSEL_CHECK(it != batch.token_values.end(), "the policy loss needs the per-token value '{}' in its batch", name);
  TESSEL_CHECK(it->second.sizes() == batch.input_ids.sizes(), "per-token value '{}' is {}, the batch's rows {}", name,
               nn::shape_string(it->second.sizes()), nn::shape_string(batch.input_ids.sizes()));
  return it->second;
}

at::Tensor row_value(const train::MicroBatch& batch, const char* name) {
  const auto it = batch.row_values.find(name);
  TESSEL_CHECK(it != batch.row_values.end(), "the policy loss needs the per-row value '{}' in its batch", name);
  TESSEL_CHECK(it->second.dim() == 1 && it->second.size(0) == batch.input_ids.size(0),
               "per-row value '{}' is {}, expected one value per row ({})", name,
               nn::shape_string(it->second.sizes()), batch.input_ids.size(0));
  return it->second;
}

void add_whole_row_values(train::MicroBatch& batch) {
  const at::Tensor tm = token_value(batch, kTokenMask);
  batch.row_values[kRowTokens] = tm.sum(1);
  const auto prev = batch.token_values.find(kPrevLogprobs);
  const auto gen = batch.token_values.find(kGenerationLogprobs);
  if (prev != batch.token_values.end() && gen != batch.token_values.end()) {
    const at::Tensor sm = row_value(batch, kSampleMask);
    batch.row_values[kRowLogImportance] = ((prev->second - gen->second) * tm * sm.unsqueeze(1)).sum(1);
  }
}

PolicyCounts global_policy_counts(const dist::DeviceMesh& mesh, const std::vector<train::MicroBatch>& batches) {
  int64_t valid_tokens = 0, valid_sequences = 0, tokens = 0;
  for (const auto& b : batches) {
    const at::Tensor sm = row_value(b, kSampleMask);
    valid_tokens += std::llround((token_value(b, kTokenMask) * sm.unsqueeze(1)).sum().item<double>());
    valid_sequences += std::llround(sm.sum().item<double>());
    tokens += b.num_tokens;
  }
  const auto global = train::sum_over_dp(mesh, {valid_tokens, valid_sequences, tokens});
  return {global[0], global[1], global[2]};
}

RowParts row_parts_of(const dist::DeviceMesh& mesh) {
  if (mesh.size("cp") == 1) return {};
  return {mesh.group("cp"), mesh.coordinate("cp") == 0};
}

at::Tensor sum_row_parts(const at::Tensor& partial, const RowParts& parts) {
  if (parts.group == nullptr || parts.group->size() == 1) return partial;
  // Forward: the sum over the group (reduce_from_group); backward: the sum of
  // every rank's gradient (copy_to_group), since each rank's own tokens use it.
  return tensor::copy_to_group(tensor::reduce_from_group(partial, parts.group), parts.group);
}

}  // namespace tessel::policy
