#include "parallel/resolve.h"

#include "core/error.h"
#include "core/log.h"
#include "parallel/custom_plan.h"
#include "parallel/hf_plan.h"
#include "parallel/optimized_plans.h"

namespace tessel::parallel {

const char* to_string(PlanSource s) {
  switch (s) {
    case PlanSource::None: return "none";
    case PlanSource::Custom: return "custom";
    case PlanSource::Optimized: return "optimized";
    case PlanSource::HuggingFace: return "huggingface";
  }
  return "?";
}

namespace {

std::string describe_custom(const config::CustomPlanSpec& spec) {
  return spec.is_inline() ? std::string("an inline mapping") : "'" + spec.reference + "'";
}

ResolvedPlan finish(ResolvedPlan r, const ResolveOptions& options) {
  if (options.log) log::info("{}", r.log_line);
  return r;
}

}  // namespace

ResolvedPlan resolve_parallel_plan(const dist::MeshLayout& mesh, const config::ParallelismConfig& par,
                                   const models::ModelConfig& model, const ResolveOptions& options) {
  ResolvedPlan r;
  const int64_t tp = mesh.dim_size(dist::MeshDim::Tp);
  const std::string arch = model.architecture.empty() ? "<unknown architecture>" : model.architecture;
  if (tp <= 1) {
    r.log_line = par.custom_parallel_plan
                     ? fmt::format("tensor-parallel plan: none (tensor_parallel_size is 1); the custom plan {} is "
                                   "ignored: it only applies with tensor_parallel_size > 1",
                                   describe_custom(*par.custom_parallel_plan))
                     : "tensor-parallel plan: none (tensor_parallel_size is 1)";
    return finish(std::move(r), options);
  }
  if (models::is_moe(model)) {
    // Only the optimized plans split MoE models, over their dense part (the
    // router and experts stay whole on every tp rank, which route every token
    // alike); a custom or HF plan could split experts or the router, which
    // training does not support (HF's MoE plans are inference plans).
    const auto refuse = [&](const std::string& what) {
      return UsageError(fmt::format("tensor_parallel_size={} with the mixture-of-experts model {} ({} experts): {}",
                                    tp, arch, model.num_experts, what));
    };
    if (par.custom_parallel_plan) {
      throw refuse("custom plans over MoE models are not built (the optimized plan splits attention and the dense "
                   "layers' MLPs, keeping routers and experts whole); remove "
                   "policy.dtensor_cfg.custom_parallel_plan");
    }
    if (par.sequence_parallel) {
      throw refuse("sequence parallelism over MoE layers is not built (each tp rank would route only part of each "
                   "row); set policy.dtensor_cfg.sequence_parallel=false");
    }
    if (mesh.ep() > 1) {
      throw refuse(fmt::format("tensor parallelism together with expert_parallel_size={} is not built (the ranks of "
                               "a tp group hold the same tokens); set one of them to 1",
                               mesh.ep()));
    }
    const auto builder = find_optimized_plan(model.architecture);
    if (!builder) {
      throw refuse("no optimized plan is registered for it, and HF's MoE plans are inference plans; set "
                   "policy.dtensor_cfg.tensor_parallel_size=1");
    }
    try {
      r.plan = (*builder)(model, OptimizedPlanOptions{tp, false});
    } catch (const Error& e) {
      throw refuse(std::string(e.what()) + "; set policy.dtensor_cfg.tensor_parallel_size=1 or a tp size that "
                                           "divides the heads");
    }
    r.source = PlanSource::Optimized;
    r.parallelize_options.plan_name = "optimized plan for " + arch;
    r.log_line = fmt::format("tensor-parallel plan: optimized plan for {} (tp {}, sequence parallel off): attention "
                             "and the dense layers' MLPs split, routers and experts whole on every tp rank",
                             arch, tp);
    return finish(std::move(r), options);
  }
  const std::string sp = par.sequence_parallel ? "on" : "off";

  if (par.custom_parallel_plan) {
    CustomPlan custom = load_custom_plan(*par.custom_parallel_plan, par.config_path);
    r.source = PlanSource::Custom;
    r.plan = std::move(custom.plan);
    r.parallelize_options.strict = true;
    r.parallelize_options.plan_name = "custom plan " + custom.origin;
    r.log_line = fmt::format("tensor-parallel plan: custom, from {} ({} entries, tp {}); the optimized and HF "
                             "plans are not used because a custom plan takes precedence{}",
                             custom.origin, r.plan.size(), tp,
                             par.sequence_parallel ? " (sequence_parallel is up to the custom plan)" : "");
    return finish(std::move(r), options);
  }

  std::string optimized_why;
  if (auto builder = find_optimized_plan(model.architecture)) {
    try {
      r.plan = (*builder)(model, OptimizedPlanOptions{tp, par.sequence_parallel});
      r.source = PlanSource::Optimized;
      r.parallelize_options.plan_name = "optimized plan for " + arch;
      r.log_line = fmt::format("tensor-parallel plan: optimized plan for {} (tp {}, sequence parallel {}); no "
                               "custom plan given; the HF plan is the fallback and not needed",
                               arch, tp, sp);
      return finish(std::move(r), options);
    } catch (const Error& e) {
      optimized_why = fmt::format("the optimized plan for {} failed to build: {}", arch, e.what());
    }
  } else {
    optimized_why = fmt::format("no optimized plan is registered for {}", arch);
  }

  try {
    HfPlan hf = hf_plan(model);
    r.source = PlanSource::HuggingFace;
    r.plan = std::move(hf.plan);
    r.parallelize_options.plan_name = "HF plan (" + hf.origin + ")";
    r.parallelize_options.vocab_parallel_head = options.vocab_parallel_loss;
    r.log_line = fmt::format("tensor-parallel plan: HF plan from {} (tp {}{}); no custom plan given; {}", hf.origin,
                             tp, par.sequence_parallel ? ", sequence_parallel not supported by HF plans: off" : "",
                             optimized_why);
    return finish(std::move(r), options);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("no tensor-parallel plan for {} with tensor_parallel_size {}: no custom plan "
                                 "given; {}; {}. Set policy.dtensor_cfg.tensor_parallel_size=1, or give a plan with "
                                 "policy.dtensor_cfg.custom_parallel_plan",
                                 arch, tp, optimized_why, e.what()));
  }
}

}  // namespace tessel::parallel
