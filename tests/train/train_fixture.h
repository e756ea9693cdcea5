// Shared set-up of the train tests: a temporary directory holding a tiny
// fixed SFT dataset (JSONL, prompt/response pairs a byte-level model learns
// within a few steps) and a config built from the base recipe
// (examples/configs/sft.yaml) with overrides, as a user would write them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "config/loader.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "fsdp/state_dict.h"
#include "train/trainer.h"
#include "support/source_tree.h"

namespace tessel::train::testing {

// The mesh of a single-process run (world 1).
inline dist::DeviceMesh world_mesh() {
  dist::MeshSizes sizes;
  sizes.world_size = 1;
  return dist::DeviceMesh(dist::MeshLayout(sizes), dist::world());
}

// No progress output and no log files.
inline RunOptions quiet() {
  RunOptions r;
  r.quiet = true;
  r.write_logs = false;
  return r;
}

// The trained parameters as full tensors on the host, by name (a run on a
// device gathers them there; collective).
inline std::map<std::string, at::Tensor> full_params(TrainResult& r) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : fsdp::full_state_dict(*r.model.model)) out[name] = t.to(at::kCPU);
  return out;
}

inline std::filesystem::path source_dir() { return test_support::source_tree(); }

class TrainFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("tessel_train_") + info->test_suite_name() + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream out(dataset_path());
    // 24 arithmetic prompts with short answers: lengths differ, so micro
    // batches get padding, and the answers are learnable.
    for (int i = 0; i < 24; ++i) {
      const int a = i % 7, b = (i * 3) % 5;
      out << "{\"input\": \"What is " << a << " plus " << b << "?\", \"output\": \" " << a + b
          << (i % 2 ? " is the sum." : ".") << "\"}\n";
    }
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dataset_path() const { return (dir_ / "tiny.jsonl").string(); }
  std::string log_dir() const { return (dir_ / "logs").string(); }

  // The base overrides of these tests, then `extra` (later wins).
  std::vector<std::string> overrides(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> o = {
        "policy.model_name=tiny-llama",
        "sft.max_num_steps=6",
        "sft.max_num_epochs=100",
        "sft.val_period=0",
        "sft.val_at_start=false",
        "sft.val_at_end=false",
        "policy.train_global_batch_size=4",
        "policy.train_micro_batch_size=4",
        "policy.max_total_sequence_length=64",
        "policy.optimizer.kwargs.lr=0.003",
        "policy.optimizer.kwargs.weight_decay=0.01",
        "policy.scheduler=null",
        "checkpointing.enabled=false",
        "data.train.dataset_name='" + dataset_path() + "'",
        "data.validation.dataset_name='" + dataset_path() + "'",
        "logger.log_dir='" + log_dir() + "'",
    };
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  }

  config::Config make_config(const std::vector<std::string>& extra = {}) const {
    return config::load_config(source_dir() / "examples" / "configs" / "sft.yaml",
                               overrides(extra));
  }

  std::filesystem::path dir_;
};

}  // namespace tessel::train::testing
