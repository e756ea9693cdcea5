// The layouts the policy layer is checked on against one process (SPEC 8,
// SPEC 11): each a mesh on a block of the world (train/layout_parity.h) and
// the policy.dtensor_cfg overrides that describe it to the model setup.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dist/device_mesh.h"
#include "train/layout_parity.h"
#include "train/model_setup.h"

namespace tessel::policy::testing {

struct Layout {
  std::string name;
  int world = 1, tp = 1, cp = 1, replicate = 1, ep = 1;
  bool sequence_parallel = false;

  std::vector<std::string> overrides() const {
    return {"policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(tp),
            "policy.dtensor_cfg.context_parallel_size=" + std::to_string(cp),
            "policy.dtensor_cfg.dp_replicate_size=" + std::to_string(replicate),
            "policy.dtensor_cfg.expert_parallel_size=" + std::to_string(ep),
            std::string("policy.dtensor_cfg.sequence_parallel=") + (sequence_parallel ? "true" : "false")};
  }
  // Collective over the world: every rank builds every layout's mesh.
  dist::DeviceMesh mesh() const {
    dist::MeshSizes sizes;
    sizes.world_size = world;
    sizes.tp = tp;
    sizes.cp = cp;
    sizes.dp_replicate = replicate;
    sizes.ep = ep;
    return train::testing::block_mesh(sizes);
  }
};

inline Layout one_process() { return {"one process"}; }

// The layouts of issue 41's parity list for a dense model.
inline std::vector<Layout> dense_layouts() {
  return {{"fsdp 2", 2},
          {"hsdp 2x2", 4, 1, 1, 2},
          {"tp 2", 2, 2},
          {"tp 2 + sp", 2, 2, 1, 1, 1, true},
          {"cp 2", 2, 1, 2},
          {"tp 2 x fsdp 2", 4, 2}};
}

// Expert parallelism (MoE presets only), alone and over FSDP.
inline std::vector<Layout> expert_layouts() { return {{"ep 2", 2, 1, 1, 1, 2}, {"ep 2 x fsdp 2", 4, 1, 1, 1, 2}}; }

// Each of this rank's parameters `got` (train::mesh_state_dict of a run on a
// layout) against its piece of the one-process run's whole ones `ref`.
inline void expect_same_parameters(const std::vector<std::pair<std::string, train::MeshParameter>>& got,
                                   const std::vector<std::pair<std::string, train::MeshParameter>>& ref,
                                   const std::string& what) {
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, p] : ref) whole[name] = p.local.detach();
  for (const auto& [name, p] : got) {
    const at::Tensor expected = p.spec.local_view(whole.at(name), p.coords);
    EXPECT_TRUE(at::allclose(p.local.detach(), expected, 1e-4, 1e-5))
        << what << ": " << name << " max diff " << (p.local.detach() - expected).abs().max().item<float>();
  }
}

}  // namespace tessel::policy::testing
