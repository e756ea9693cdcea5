#include "parallel/parallelize.h"

#include "core/error.h"
#include "core/log.h"
#include "models/causal_lm.h"
#include "nn/module.h"
#include "parallel/hf_styles.h"
#include "parallel/pattern.h"
#include "parallel/style.h"

namespace tessel::parallel {

namespace {

StylePtr style_of(const PlanEntry& e, const std::string& path, const ParallelizeOptions& o) {
  if (e.style) return e.style;
  const bool head = o.vocab_parallel_head && (path == "lm_head" || path.ends_with(".lm_head"));
  return style_from_string(e.style_string, head);
}

struct Match {
  std::string path;
  nn::Module* module;
  const PlanEntry* entry;
  StylePtr style;
};

std::vector<Match> find_matches(torch::nn::Module& root, const Plan& plan, const ParallelizeOptions& o) {
  const auto modules = nn::named_tessel_modules(root);
  std::vector<bool> used(plan.entries.size(), false);
  std::vector<Match> out;
  for (const auto& [path, module] : modules) {
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
      if (!match_pattern(plan.entries[i].pattern, path)) continue;
      used[i] = true;
      bool first = true;
      for (const auto& m : out) first = first && m.module != module;
      if (first) {
        try {
          out.push_back(Match{path, module, &plan.entries[i], style_of(plan.entries[i], path, o)});
        } catch (const UsageError& e) {
          throw UsageError(fmt::format("{}: pattern '{}': {}", o.plan_name, plan.entries[i].pattern, e.what()));
        }
      }
    }
  }
  if (o.strict) {
    std::vector<std::string> paths;
    for (const auto& [path, module] : modules) paths.push_back(path);
    for (std::size_t i = 0; i < plan.entries.size(); ++i) {
      if (used[i]) continue;
      std::string nearest;
      for (const auto& p : nearest_paths(plan.entries[i].pattern, paths)) nearest += (nearest.empty() ? "" : ", ") + p;
      throw UsageError(fmt::format("{}: pattern '{}' matches no module of the model. Nearest module paths: {}. "
                                   "Patterns match whole paths segment by segment; `*` matches within one segment.",
                                   o.plan_name, plan.entries[i].pattern, nearest.empty() ? "none" : nearest));
    }
  }
  return out;
}

std::string describe_entry(const Match& m) { return m.style->describe(); }

}  // namespace

std::vector<AppliedStyle> match_plan(torch::nn::Module& root, const Plan& plan, const ParallelizeOptions& options) {
  std::vector<AppliedStyle> out;
  for (const auto& m : find_matches(root, plan, options)) out.push_back({m.path, m.entry->pattern, describe_entry(m)});
  return out;
}

ParallelizeResult parallelize(torch::nn::Module& root, const dist::CommunicatorPtr& tp_group, const Plan& plan,
                              const ParallelizeOptions& options) {
  TESSEL_CHECK(tp_group != nullptr, "parallelize: the tp group is null");
  ParallelizeResult result;
  ApplyContext ctx;
  ctx.group = tp_group;
  ctx.registry = &result.params;
  if (auto* lm = dynamic_cast<models::CausalLM*>(&root)) ctx.tied = lm->tied_parameter_names();

  for (const auto& m : find_matches(root, plan, options)) {
    try {
      m.style->apply(*m.module, ctx);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: applying '{}' -> {} to module '{}' failed: {}", options.plan_name, m.entry->pattern,
                              m.style->describe(), m.path, e.what()));
    }
    result.applied.push_back({m.path, m.entry->pattern, describe_entry(m)});
  }
  // Parameters no style placed stay whole on every rank.
  for (const auto& [path, module] : nn::named_tessel_modules(root)) {
    for (const auto& item : module->named_parameters(/*recurse=*/false)) {
      const std::string name = ApplyContext::param_name(*module, item.key());
      if (!result.params.contains(name)) ctx.replicate_parameter(*module, item.key(), "unplanned (replicated)");
    }
  }
  return result;
}

}  // namespace tessel::parallel
