// Shared set-up of the tests that run `tessel train` through the built binary
// (support/run_tessel.h): the fixture's config written as a file, as a user
// keeps one, and the per-step records a run leaves in metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "train/train_fixture.h"

namespace tessel::train::testing {

// The "train" records of <log_dir>/metrics.jsonl, in file order.
inline std::vector<nlohmann::json> train_records(const std::string& log_dir) {
  std::ifstream in(log_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["split"] == "train") out.push_back(j);
  }
  return out;
}

class TrainCliFixture : public TrainFixture {
 protected:
  // The fixture's resolved config, written as a file the way a user keeps one.
  std::string write_config(const std::vector<std::string>& extra = {}) {
    const std::string path = (dir_ / "run.yaml").string();
    io::write_file_atomically(path, make_config(extra).to_yaml());
    return path;
  }
};

}  // namespace tessel::train::testing
