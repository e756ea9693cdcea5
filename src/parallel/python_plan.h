// Custom plans written as the reference writes them: a Python module of
// ParallelStyle objects (SPEC 3; examples/custom_parallel/custom_parallel.py),
//
//   from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
//   from torch.distributed.tensor.placement_types import Replicate, Shard
//   my_plan = {
//       "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
//       "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
//   }
//
// read as data (config/python_data.h), never executed. Each dict value is a
// call of ColwiseParallel, RowwiseParallel, SequenceParallel,
// PrepareModuleInput or PrepareModuleOutput with torch's keyword arguments
// and defaults, or an HF style string ("colwise"). Layouts are Replicate(),
// Shard(d) and Partial(). They map onto tessel's style objects with torch's
// semantics, e.g.
//   ColwiseParallel(input_layouts=Shard(-1), output_layouts=Replicate())
//       all-gathers the sharded input features, computes this rank's output
//       features and all-gathers them (an output projection that gathers
//       instead of summing);
//   ColwiseParallel(output_layouts=Shard(-1), use_local_output=False) on
//       lm_head: vocab-sharded logits for the vocab-parallel loss;
//   PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)}, ...):
//       HF passes hidden states by keyword; tessel modules take them as
//       input 0 (position_embeddings, attention_mask and the like are
//       replicated on every rank and may only be named with None or
//       Replicate()).
// What torch would reject or silently mis-run (a tuple where one layout is
// taken, Partial() where a style cannot take it, positional arguments to a
// style, mismatched layout lists) is an error naming file, line and column.
#pragma once

#include <filesystem>
#include <string>

#include "config/python_data.h"
#include "parallel/plan.h"
#include "parallel/plan_file_imports.h"

namespace tessel::parallel {

// Reads and parses a plan file (UsageError if unreadable or not in the subset).
config::PyModule read_python_plan_file(const std::filesystem::path& file);

// The plan bound to `name` in `module` (UsageError naming the file, line and
// column for anything that is not a dict of pattern -> style).
Plan plan_from_python(const config::PyModule& module, const std::string& name);

}  // namespace tessel::parallel
