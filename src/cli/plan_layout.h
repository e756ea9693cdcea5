// The layout a run would use, as `tessel plan` sees it without launching
// anything: the tensor-parallel plan resolved (custom > optimized > HF) and
// applied to a meta-device model once per tp rank over a shape-only group
// (each rank's parameter shapes and the styles applied), and one step's
// shape on that layout (micro batches per dp rank, what one micro batch
// runs on the tp group: tp_traffic.h). The dry run reports the configured
// layout; `--predict` also builds each tensor-parallel size it compares.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/step_prediction.h"
#include "cli/traffic_model.h"
#include "config/parallelism_config.h"
#include "dist/mesh_layout.h"
#include "models/model_config.h"
#include "parallel/parallelize.h"
#include "parallel/resolve.h"
#include "train/train_options.h"

namespace tessel::cli {

struct TpRankView {
  std::vector<NamedShape> named;  // this tp rank's parameters after the plan (each tied tensor once)
  std::vector<parallel::AppliedStyle> applied;
  int64_t model_elements = 0;  // of the whole model, before the plan
};

// Tp rank `r` of `tp` after `resolved`'s plan; throws tessel::Error where the
// plan does not split the model into whole heads.
TpRankView apply_as_tp_rank(const models::ModelConfig& config, const parallel::ResolvedPlan& resolved, int tp, int r);

struct LayoutInputs {
  parallel::ResolvedPlan resolved;
  std::vector<TpRankView> views;  // one per tp rank
  StepShape step;
  bool tp_modelled = true;  // the plan's tp collectives are modelled (tp_traffic.h)
};

// Throws tessel::Error where the plan does not apply to the layout.
LayoutInputs layout_inputs(const dist::MeshLayout& layout, const config::ParallelismConfig& par,
                           const models::ModelConfig& model, const train::TrainOptions& t);

}  // namespace tessel::cli
