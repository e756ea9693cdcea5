#include "cli/plan_layout.h"

#include <algorithm>
#include <memory>
#include <set>
#include <variant>

#include "cli/context_split.h"
#include "dist/shape_only_communicator.h"
#include "models/registry.h"
#include "parallel/head_split.h"
#include "parallel/parallelize.h"

namespace tessel::cli {

namespace {

// The names and shapes of `model`'s parameters, each tied tensor once.
std::vector<NamedShape> named_shapes(const torch::nn::Module& model) {
  std::vector<NamedShape> out;
  std::set<const void*> seen;
  for (const auto& item : model.named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
    out.push_back(NamedShape{item.key(), {item.value().sizes().begin(), item.value().sizes().end()}});
  }
  return out;
}

// The numels of the parameters whose gradients the plan all-reduces over tp:
// those of modules it applied SequenceParallel or a ReplicateParallel with
// gradients all-reduced to (whole on every tp rank, each seeing part of the
// work).
std::vector<int64_t> whole_param_grads(const TpRankView& view) {
  std::vector<int64_t> out;
  for (const auto& a : view.applied) {
    const bool reduced = a.style.rfind("SequenceParallel", 0) == 0 ||
                         a.style.find("gradients all-reduced over tp") != std::string::npos;
    if (!reduced) continue;
    for (const auto& p : view.named) {
      if (p.name.rfind(a.module_path + ".", 0) == 0) out.push_back(p.numel());
    }
  }
  return out;
}

}  // namespace

TpRankView apply_as_tp_rank(const models::ModelConfig& config, const parallel::ResolvedPlan& resolved, int tp, int r) {
  models::BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  auto model = models::build_model(config, meta);
  TpRankView view;
  for (const auto& p : named_shapes(*model)) view.model_elements += p.numel();
  if (!resolved.plan.empty()) {
    auto group = std::make_shared<dist::ShapeOnlyCommunicator>(tp, r, "tp");
    auto result = parallel::parallelize(*model, group, resolved.plan, resolved.parallelize_options);
    parallel::check_whole_heads(config, result.params, tp);
    view.applied = std::move(result.applied);
  }
  view.named = named_shapes(*model);
  return view;
}

LayoutInputs layout_inputs(const dist::MeshLayout& layout, const config::ParallelismConfig& par,
                           const models::ModelConfig& model, const train::TrainOptions& t) {
  parallel::ResolveOptions ro;
  ro.vocab_parallel_loss = true;  // the trainer's loss consumes vocab-sharded logits
  ro.log = false;                 // the caller reports it
  const auto dims = layout.dims();
  const int tp = dims[3];
  LayoutInputs in;
  in.resolved = parallel::resolve_parallel_plan(layout, par, model, ro);
  for (int r = 0; r < tp; ++r) in.views.push_back(apply_as_tp_rank(model, in.resolved, tp, r));
  StepShape& step = in.step;
  step.micro_batch = t.micro_batch_size;
  step.seq_len = t.max_seq_len;
  const int64_t dp = static_cast<int64_t>(dims[0]) * dims[1];
  step.micro_batches = static_cast<int>(std::max<int64_t>(1, t.global_batch_size / (t.micro_batch_size * dp)));
  const bool* reshard = std::get_if<bool>(&t.reshard_after_forward);
  step.reshard_after_forward = reshard == nullptr || *reshard;
  step.reduce_scatter_each_micro_batch = !par.accumulate_unsharded_grads;
  step.activation_checkpointing = t.activation_checkpointing;
  step.fused_head_loss = t.fused_lm_head_loss;
  step.packed_rows = t.packing.enabled;
  step.param_element_bytes = t.precision == "float32" ? 4 : 2;
  if (tp > 1) {
    // What one micro batch runs on the tp group, where the plan's form is modelled.
    const TpPlanForm form = in.resolved.source != parallel::PlanSource::Optimized ? TpPlanForm::NotModelled
                            : par.sequence_parallel ? TpPlanForm::OptimizedSequenceParallel
                                                    : TpPlanForm::Optimized;
    TpStepShape tp_step;
    tp_step.tp = tp;
    tp_step.rows = t.micro_batch_size;
    tp_step.tokens_per_row = context_split(dims[2], t.max_seq_len).tokens_per_rank;
    tp_step.activation_element_bytes = step.param_element_bytes;
    tp_step.activation_checkpointing = t.activation_checkpointing;
    step.tp = tp_collectives(model, form, tp_step, whole_param_grads(in.views.front()));
    in.tp_modelled = form != TpPlanForm::NotModelled;
  }
  return in;
}

}  // namespace tessel::cli
