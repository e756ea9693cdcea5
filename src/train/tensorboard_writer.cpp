#include "train/tensorboard_writer.h"

#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace tessel::train {

namespace {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum TFRecord
// readers verify; a plain CRC-32 would make TensorBoard drop every record.
uint32_t crc32c(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFU;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFFU] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFU;
}

// TFRecord masks the stored CRCs so that a CRC of data holding CRCs stays strong.
uint32_t masked_crc(const std::string& bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

// Fixed-width integers little-endian, as protobuf and TFRecord store them,
// independent of the host's byte order.
void put_fixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80U) {
    out.push_back(static_cast<char>((v & 0x7FU) | 0x80U));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Protobuf wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// tensorflow.Event fields: wall_time (1, double), step (2, int64),
// file_version (3, string), summary (5, Summary).
std::string event_header(int64_t step) {
  const double wall_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  uint64_t wall_bits = 0;
  std::memcpy(&wall_bits, &wall_time, sizeof wall_bits);
  std::string event;
  put_tag(event, 1, 1);
  put_fixed(event, wall_bits, 8);
  put_tag(event, 2, 0);
  put_varint(event, static_cast<uint64_t>(step));  // int64: two's complement, as protobuf does
  return event;
}

// Summary { repeated Value value = 1 }, Value { tag = 1, simple_value = 2 (float) }.
std::string summary_of(const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    const auto f = static_cast<float>(value);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    std::string v;
    put_bytes(v, 1, tag);
    put_tag(v, 2, 5);
    put_fixed(v, bits, 4);
    put_bytes(summary, 1, v);
  }
  return summary;
}

std::string hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(
        fmt::format("cannot create the TensorBoard directory {} (logger.log_dir, "
                    "logger.tensorboard_enabled): {}",
                    dir.string(), ec.message()));
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  path_ = dir / fmt::format("events.out.tfevents.{}.{}", seconds, hostname());
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    throw Error(fmt::format("cannot write {} (logger.log_dir, logger.tensorboard_enabled)",
                            path_.string()));
  }
  // Readers identify the format by this first event.
  std::string event = event_header(0);
  put_bytes(event, 3, "brain.Event:2");
  write_record(event);
}

void TensorBoardWriter::write_record(const std::string& data) {
  std::string length;
  put_fixed(length, data.size(), 8);
  std::string record = length;
  put_fixed(record, masked_crc(length), 4);
  record += data;
  put_fixed(record, masked_crc(data), 4);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  if (!out_) throw Error(fmt::format("writing {} failed (disk full?)", path_.string()));
}

void TensorBoardWriter::write_scalars(int64_t step,
                                      const std::vector<std::pair<std::string, double>>& scalars) {
  std::string event = event_header(step);
  put_bytes(event, 5, summary_of(scalars));
  write_record(event);
}

void TensorBoardWriter::write(const StepMetrics& m) {
  std::vector<std::pair<std::string, double>> scalars = {
      {"train/loss", m.loss},
      {"train/grad_norm", m.grad_norm},
      {"train/lr", m.lr},
      {"train/tokens", static_cast<double>(m.tokens)},
      {"train/valid_tokens", static_cast<double>(m.valid_tokens)},
      {"train/tokens_per_s", m.tokens_per_s},
      {"train/step_time_s", m.step_time_s},
      {"train/comm_wait_s", m.comm_wait_s}};
  // Only at the steps that gathered every rank's figures (logger.rank_metrics_period).
  if (!m.peak_rss_bytes.empty()) {
    scalars.emplace_back("train/peak_rss_bytes_max", static_cast<double>(max_over_ranks(m.peak_rss_bytes)));
    if (!m.peak_device_bytes.empty()) {
      scalars.emplace_back("train/peak_device_bytes_max",
                           static_cast<double>(max_over_ranks(m.peak_device_bytes)));
    }
    scalars.emplace_back("train/inter_node_bytes", static_cast<double>(total_other_node(m.sent_bytes)));
  }
  // The objective's and the recipe's metrics (DPO's accuracy, GRPO's rewards
  // and phase times), as metrics.jsonl has them; its "loss" is the one above.
  for (const auto& [name, value] : m.objective_metrics) {
    if (name != "loss") scalars.emplace_back("train/" + name, value);
  }
  write_scalars(m.step, scalars);
}

void TensorBoardWriter::write(const ValMetrics& m) {
  std::vector<std::pair<std::string, double>> scalars = {
      {"validation/valid_tokens", static_cast<double>(m.valid_tokens)}};
  // A validation without a loss (GRPO's scores generations) has none to plot.
  if (std::isfinite(m.loss)) scalars.emplace_back("validation/val_loss", m.loss);
  for (const auto& [name, value] : m.objective_metrics) {
    if (name != "loss") scalars.emplace_back("validation/" + name, value);
  }
  write_scalars(m.step, scalars);
}

}  // namespace tessel::train
