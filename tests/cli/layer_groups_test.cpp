// The grouping behind `tessel plan`'s compact module list, on hand-written
// module lists: runs of layers collapse, a differing style or pattern keeps
// its own line, and paths without a layer index are left alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/layer_groups.h"

namespace tessel::cli {
namespace {

std::vector<std::string> rendered(const std::vector<ModuleLine>& groups) {
  std::vector<std::string> out;
  for (const auto& g : groups) out.push_back(g.modules + " " + g.style + " [" + g.pattern + "]");
  return out;
}

TEST(LayerGroups, IndexSetsAreRuns) {
  EXPECT_EQ(index_set({0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15}), "{0..3,8..15}");
  EXPECT_EQ(index_set({5}), "{5}");
  EXPECT_EQ(index_set({0, 2, 3, 7}), "{0,2..3,7}");
}

TEST(LayerGroups, SameModuleOfEveryLayerIsOneLine) {
  std::vector<ModuleLine> modules = {{"model.embed_tokens", "Rowwise", "model.embed_tokens"}};
  for (int layer = 0; layer < 3; ++layer) {
    const std::string l = "model.layers." + std::to_string(layer);
    modules.push_back({l + ".self_attn.q_proj", "Colwise", "model.layers.*.self_attn.q_proj"});
    modules.push_back({l + ".mlp.down_proj", "Rowwise", "model.layers.*.mlp.down_proj"});
  }
  modules.push_back({"lm_head", "Colwise", "lm_head"});
  EXPECT_EQ(rendered(group_layers(modules)),
            (std::vector<std::string>{
                "model.embed_tokens Rowwise [model.embed_tokens]",
                "model.layers.{0..2}.self_attn.q_proj Colwise [model.layers.*.self_attn.q_proj]",
                "model.layers.{0..2}.mlp.down_proj Rowwise [model.layers.*.mlp.down_proj]",
                "lm_head Colwise [lm_head]",
            }));
}

TEST(LayerGroups, ADifferentStyleOrPatternBreaksTheRun) {
  std::vector<ModuleLine> modules;
  for (int layer = 0; layer < 6; ++layer) {
    const std::string path = "model.layers." + std::to_string(layer) + ".mlp.up_proj";
    if (layer == 2) {
      modules.push_back({path, "Rowwise", "model.layers.*.mlp.up_proj"});
    } else if (layer == 5) {
      modules.push_back({path, "Colwise", path});
    } else {
      modules.push_back({path, "Colwise", "model.layers.*.mlp.up_proj"});
    }
  }
  EXPECT_EQ(rendered(group_layers(modules)),
            (std::vector<std::string>{
                "model.layers.{0..1,3..4}.mlp.up_proj Colwise [model.layers.*.mlp.up_proj]",
                "model.layers.2.mlp.up_proj Rowwise [model.layers.*.mlp.up_proj]",
                "model.layers.5.mlp.up_proj Colwise [model.layers.5.mlp.up_proj]",
            }));
}

}  // namespace
}  // namespace tessel::cli
