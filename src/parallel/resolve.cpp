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
    // Every tp rank must route every token alike for per-expert collectives
    // to match, and HF's MoE plans split experts per expert or only for
    // inference; refused until tensor parallelism over MoE layers is built
    // and tested (the experts then replicated or split whole).
    throw UsageError(fmt::format(
        "tensor_parallel_size={} is not supported for the mixture-of-experts model {} ({} experts): tensor "
        "parallelism over MoE models (dense or expert styles, custom plans included) is not built yet; set "
        "policy.dtensor_cfg.tensor_parallel_size=1 (the experts and the dense layers are FSDP-sharded over "
        "dp_shard_cp)",
        tp, arch, model.num_experts));
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
