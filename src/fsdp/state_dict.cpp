#include "fsdp/state_dict.h"

#include <ATen/ATen.h>

#include <unordered_map>

#include "core/error.h"
#include "fsdp/fsdp_param_group.h"
#include "fsdp/fsdp_state.h"

namespace tessel::fsdp {

namespace {

struct Owner {
  const FSDPParam* param;
  const FSDPParamGroup* group;
};

std::unordered_map<const c10::TensorImpl*, Owner> sharded_params_under(torch::nn::Module& root) {
  std::unordered_map<const c10::TensorImpl*, Owner> owners;
  for (auto& s : states_in_subtree(root)) {
    const FSDPParamGroup* g = s->param_group();
    if (g == nullptr) continue;
    for (const FSDPParam* p : g->params()) {
      owners[p->sharded_param().unsafeGetTensorImpl()] = Owner{p, g};
    }
  }
  return owners;
}

}  // namespace

std::vector<std::pair<std::string, ShardedParameter>> sharded_state_dict(torch::nn::Module& root) {
  const auto owners = sharded_params_under(root);
  std::vector<std::pair<std::string, ShardedParameter>> result;
  for (const auto& item : root.named_parameters(/*recurse=*/true)) {
    const at::Tensor& t = item.value();
    auto it = owners.find(t.unsafeGetTensorImpl());
    if (it == owners.end()) {
      result.emplace_back(item.key(), ShardedParameter{t, tensor::ShardSpec(t.sizes().vec(), {}),
                                                       tensor::GroupCoord{1, 0}, 0});
      continue;
    }
    const FSDPParam& p = *it->second.param;
    const auto& comm = it->second.group->mesh().shard();
    tensor::ShardSpec spec(p.global_shape(),
                           {tensor::Placement{kShardMeshDim, tensor::Layout::shard(0)}});
    result.emplace_back(item.key(), ShardedParameter{p.sharded_param(), std::move(spec),
                                                     tensor::GroupCoord{comm->size(), comm->rank()},
                                                     p.dim0_offset()});
  }
  return result;
}

void for_each_full_parameter(torch::nn::Module& root,
                             const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  at::NoGradGuard no_grad;
  const auto owners = sharded_params_under(root);
  for (const auto& item : root.named_parameters(/*recurse=*/true)) {
    const at::Tensor& t = item.value();
    auto it = owners.find(t.unsafeGetTensorImpl());
    if (it == owners.end()) {
      visit(item.key(), t.detach());
      continue;
    }
    const FSDPParam& p = *it->second.param;
    const auto& comm = it->second.group->mesh().shard();
    const int64_t n = p.padded_shard_numel();
    at::Tensor padded = at::zeros({n}, p.sharded_param().options().requires_grad(false));
    if (p.local_rows() > 0)
      padded.narrow(0, 0, p.sharded_param().numel()).copy_(p.sharded_param().reshape({-1}));
    at::Tensor gathered = at::empty({comm->size() * n}, padded.options());
    comm->all_gather_into(gathered, padded);
    visit(item.key(), gathered.narrow(0, 0, p.numel()).view(p.global_shape()));
  }
}

std::vector<std::pair<std::string, at::Tensor>> full_state_dict(torch::nn::Module& root) {
  std::vector<std::pair<std::string, at::Tensor>> result;
  for_each_full_parameter(root, [&](const std::string& name, const at::Tensor& full) {
    result.emplace_back(name, full.clone());
  });
  return result;
}

void load_full_state_dict(torch::nn::Module& root,
                          const std::vector<std::pair<std::string, at::Tensor>>& full) {
  at::NoGradGuard no_grad;
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, t] : full) by_name[name] = &t;
  const auto owners = sharded_params_under(root);
  for (const auto& item : root.named_parameters(/*recurse=*/true)) {
    auto found = by_name.find(item.key());
    TESSEL_CHECK(found != by_name.end(), "load_full_state_dict: no tensor for parameter '{}'",
                 item.key());
    const at::Tensor& src = *found->second;
    const at::Tensor& t = item.value();
    auto it = owners.find(t.unsafeGetTensorImpl());
    const std::vector<int64_t> want =
        it == owners.end() ? t.sizes().vec() : it->second.param->global_shape();
    TESSEL_CHECK(src.sizes().vec() == want, "load_full_state_dict: '{}' has shape {}, expected {}",
                 item.key(), fmt::join(src.sizes().vec(), "x"), fmt::join(want, "x"));
    if (it == owners.end()) {
      t.copy_(src);
      continue;
    }
    const FSDPParam& p = *it->second.param;
    if (p.local_rows() == 0) continue;
    p.sharded_param()
        .view({p.local_rows(), p.row_numel()})
        .copy_(src.reshape({p.dim0(), p.row_numel()}).narrow(0, p.dim0_offset(), p.local_rows()));
  }
}

}  // namespace tessel::fsdp
