#include "train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tessel::train {

namespace {
// The objective's metrics beside the loss, as fields of the record.
void add_objective_metrics(nlohmann::ordered_json& j, const std::vector<std::pair<std::string, double>>& metrics) {
  for (const auto& [name, value] : metrics) {
    if (name != "loss") j[name] = value;
  }
}

void add_sent_bytes(nlohmann::ordered_json& j, const GroupBytes& sent) {
  auto& by_group = j["sent_bytes"] = nlohmann::ordered_json::object();
  for (const auto& [group, b] : sent) by_group[group] = {{"same_node", b.same_node}, {"other_node", b.other_node}};
  j["inter_node_bytes"] = total_other_node(sent);
}

// {"ranks": [3], "node": "node1", "whole_node": false, "wait_s": ..., ...}, or null.
void add_straggler(nlohmann::ordered_json& j, const std::optional<Straggler>& s) {
  if (!s) {
    j["straggler"] = nullptr;
    return;
  }
  j["straggler"] = {{"ranks", s->ranks},
                    {"node", s->node},
                    {"whole_node", s->whole_node},
                    {"wait_s", s->wait_s},
                    {"others_median_wait_s", s->others_median_wait_s},
                    {"step_time_s", s->step_time_s}};
}
}  // namespace

int64_t max_over_ranks(const std::vector<int64_t>& per_rank) {
  return per_rank.empty() ? 0 : *std::max_element(per_rank.begin(), per_rank.end());
}

MetricsWriter::MetricsWriter(const std::filesystem::path& dir, bool append)
    : path_(dir / "metrics.jsonl") {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(fmt::format("cannot create logger.log_dir {}: {}", dir.string(), ec.message()));
  }
  out_.open(path_, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw Error(fmt::format("cannot write {} (logger.log_dir)", path_.string()));
}

void MetricsWriter::write(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["split"] = "train";
  j["step"] = m.step;
  j["loss"] = m.loss;
  if (m.aux_loss != 0.0) j["aux_loss"] = m.aux_loss;
  add_objective_metrics(j, m.objective_metrics);
  j["grad_norm"] = m.grad_norm;
  j["lr"] = m.lr;
  j["tokens"] = m.tokens;
  j["valid_tokens"] = m.valid_tokens;
  j["tokens_per_s"] = m.tokens_per_s;
  j["step_time_s"] = m.step_time_s;
  j["comm_wait_s"] = m.comm_wait_s;
  // Only at the steps that gathered them (logger.rank_metrics_period).
  if (!m.peak_rss_bytes.empty()) {
    j["peak_rss_bytes"] = m.peak_rss_bytes;
    j["peak_rss_bytes_max"] = max_over_ranks(m.peak_rss_bytes);
    if (!m.peak_device_bytes.empty()) {
      j["peak_device_bytes"] = m.peak_device_bytes;
      j["peak_device_bytes_max"] = max_over_ranks(m.peak_device_bytes);
    }
    // Bytes the step's collectives sent, summed over ranks: to peers on the
    // same node and across nodes, per mesh group.
    add_sent_bytes(j, m.sent_bytes);
    j["comm_wait_s_per_rank"] = m.comm_wait_s_per_rank;
    add_straggler(j, m.straggler);
  }
  out_ << j.dump() << '\n';
  out_.flush();
}

void MetricsWriter::write_run_totals(const GroupBytes& sent, const std::optional<Straggler>& straggler) {
  nlohmann::ordered_json j;
  j["split"] = "run";
  add_sent_bytes(j, sent);
  add_straggler(j, straggler);
  out_ << j.dump() << '\n';
  out_.flush();
}

void MetricsWriter::write(const ValMetrics& m) {
  nlohmann::ordered_json j;
  j["split"] = "val";
  j["step"] = m.step;
  j["loss"] = m.loss;
  add_objective_metrics(j, m.objective_metrics);
  j["valid_tokens"] = m.valid_tokens;
  out_ << j.dump() << '\n';
  out_.flush();
}

void MetricsWriter::write(const SetupMetrics& m) {
  nlohmann::ordered_json j;
  j["split"] = "setup";
  j["rss_bytes"] = m.rss_bytes;
  j["peak_rss_bytes"] = m.peak_rss_bytes;
  j["peak_rss_bytes_max"] = max_over_ranks(m.peak_rss_bytes);
  j["shard_bytes"] = m.shard_bytes;
  out_ << j.dump() << '\n';
  out_.flush();
}

}  // namespace tessel::train
