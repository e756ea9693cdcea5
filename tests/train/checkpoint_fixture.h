// The train fixture with a checkpoint directory: runs that save every second
// step into <dir>/ckpt and keep every step, for the tests that damage or
// alter a saved checkpoint and read it back.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "train/train_fixture.h"

namespace tessel::train::testing {

class CheckpointFixture : public TrainFixture {
 protected:
  std::filesystem::path ckpt() const { return dir_ / "ckpt"; }
  std::filesystem::path step(int n) const { return ckpt() / ("step_" + std::to_string(n)); }

  // Overrides saving steps 2, 4, ... into ckpt(), keeping all, then `extra`.
  std::vector<std::string> saving(const std::vector<std::string>& extra) const {
    std::vector<std::string> o = {"checkpointing.enabled=true",
                                  "checkpointing.checkpoint_dir='" + ckpt().string() + "'",
                                  "checkpointing.save_period=2", "checkpointing.keep_top_k=null"};
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  }
};

}  // namespace tessel::train::testing
