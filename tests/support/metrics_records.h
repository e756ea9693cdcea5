// A run's metrics.jsonl (train/metrics.h) read back by the end-to-end tests
// of the default runs (`tessel dpo`, `tessel grpo`): its records of one split
// and means of a metric over a range of them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::test_support {

// The records of <log_dir>/metrics.jsonl whose "split" is `split` ("train", "val"), in order.
inline std::vector<nlohmann::json> metrics_records(const std::string& log_dir, const std::string& split) {
  std::ifstream in(log_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["split"] == split) out.push_back(j);
  }
  return out;
}

// The mean of `key` over records [from, to).
inline double mean_of(const std::vector<nlohmann::json>& rows, std::size_t from, std::size_t to, const char* key) {
  double sum = 0.0;
  for (std::size_t i = from; i < to; ++i) sum += rows[i][key].get<double>();
  return sum / static_cast<double>(to - from);
}

}  // namespace tessel::test_support
