#include "parallel/plan_file_imports.h"

namespace tessel::parallel {

const config::PythonImports& plan_file_imports() {
  static const config::PythonImports imports = [] {
    const std::vector<std::string> styles = {"ColwiseParallel", "RowwiseParallel", "SequenceParallel",
                                             "PrepareModuleInput", "PrepareModuleOutput", "ParallelStyle"};
    const std::vector<std::string> placements = {"Replicate", "Shard", "Partial", "Placement"};
    config::PythonImports out;
    out.allowed["torch.distributed.tensor.parallel"] = styles;
    out.allowed["torch.distributed.tensor.parallel.style"] = styles;
    out.allowed["torch.distributed.tensor.placement_types"] = placements;
    out.allowed["torch.distributed.tensor"] = placements;
    out.allowed["torch.distributed._tensor"] = placements;
    out.allowed["torch.distributed._tensor.placement_types"] = placements;
    out.allowed["typing"] = {"Any", "Dict", "Mapping", "Optional", "Tuple", "Union"};
    return out;
  }();
  return imports;
}

}  // namespace tessel::parallel
