#include "train/step_objective.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.h"

namespace tessel::train {

MetricSums::Sum& MetricSums::sum_named(const std::string& name) {
  for (auto& sum : sums_) {
    if (sum.name == name) return sum;
  }
  sums_.push_back({name, 0.0, at::Tensor()});
  return sums_.back();
}

void MetricSums::add(const std::string& name, double value) { sum_named(name).host += value; }

void MetricSums::add(const std::string& name, const at::Tensor& value) {
  TESSEL_CHECK(value.numel() == 1, "metric '{}' must be a scalar, got {} values", name, value.numel());
  const at::Tensor v = value.detach().to(at::kDouble).reshape({});
  Sum& sum = sum_named(name);
  // A copy first: `v` may be the caller's own tensor.
  sum.tensor = sum.tensor.defined() ? sum.tensor + v.to(sum.tensor.device()) : v.clone();
}

void StepObjective::set_fused_head(bool fused, const ShardedModel& model) {
  if (fused && model.tp_group && model.tp_group->size() > 1) {
    throw UsageError(fmt::format("policy.fused_lm_head_loss=true needs the whole vocabulary on each rank, and "
                                 "tensor parallelism (tensor_parallel_size {}) splits lm_head's: set it to false "
                                 "(the vocab-parallel loss never gathers the logits either)",
                                 model.tp_group->size()));
  }
  fused_head_ = fused;
}

Metrics MetricSums::take() {
  std::vector<at::Tensor> tensors;
  for (const auto& sum : sums_) {
    if (!sum.tensor.defined()) continue;
    // Stacked on one device: the first sum's (a step's are all on its device).
    tensors.push_back(tensors.empty() ? sum.tensor : sum.tensor.to(tensors.front().device()));
  }
  // The one read: every tensor sum copied to the host together.
  const at::Tensor read = tensors.empty() ? at::Tensor() : at::stack(tensors).to(at::kCPU).contiguous();
  const double* values = read.defined() ? read.data_ptr<double>() : nullptr;
  Metrics out;
  out.reserve(sums_.size());
  for (const auto& sum : sums_) out.emplace_back(sum.name, sum.host + (sum.tensor.defined() ? *values++ : 0.0));
  sums_.clear();
  return out;
}

std::vector<double> sum_over_dp_cp(const dist::DeviceMesh& mesh, const std::vector<double>& local) {
  const auto& group = mesh.group("dp_cp");
  const auto n = static_cast<int64_t>(local.size());
  std::vector<double> out(local.size(), 0.0);
  if (n == 0) return out;
  const auto mine = at::tensor(local, at::kDouble);
  auto all = at::zeros({group->size() * n}, at::kDouble);
  group->all_gather_into(all, mine);
  const double* data = all.data_ptr<double>();
  for (int r = 0; r < group->size(); ++r) {
    for (int64_t i = 0; i < n; ++i) out[i] += data[r * n + i];
  }
  return out;
}

Metrics sum_over_dp_cp(const dist::DeviceMesh& mesh, Metrics local) {
  std::vector<double> values;
  values.reserve(local.size());
  for (const auto& [name, v] : local) values.push_back(v);
  const std::vector<double> global = sum_over_dp_cp(mesh, values);
  for (size_t i = 0; i < local.size(); ++i) local[i].second = global[i];
  return local;
}

std::vector<int64_t> sum_over_dp(const dist::DeviceMesh& mesh, const std::vector<int64_t>& local) {
  auto counts = at::tensor(local, at::kLong);
  mesh.group("dp")->all_reduce(counts);
  return std::vector<int64_t>(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
}

double metric(const Metrics& metrics, const std::string& name) {
  for (const auto& [key, value] : metrics) {
    if (key == name) return value;
  }
  throw Error("no metric named '" + name + "'");
}

}  // namespace tessel::train
