// TensorBoard event files (logger.tensorboard_enabled), read back by a decoder
// written here from the format's description, sharing no code with the
// writer: its own CRC-32C (checked against the standard check value), its own
// TFRecord framing and protobuf field parsing. A training run's file must
// hold valid records only, start with the file_version event, and carry for
// every step exactly the values metrics.jsonl holds (as float32).
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/tensorboard_writer.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using testing::TrainFixture;
using testing::world_mesh;

// --- the independent decoder ------------------------------------------------

// Bitwise CRC-32C: slow and obviously the definition (reflected 0x82F63B78).
uint32_t reference_crc32c(const std::string& bytes) {
  uint32_t crc = ~0U;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1U)));
  }
  return ~crc;
}

uint32_t reference_masked(const std::string& bytes) {
  const uint32_t crc = reference_crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

uint64_t little_endian(const std::string& bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(bytes.at(at + static_cast<size_t>(i)));
  }
  return v;
}

// The payloads of every TFRecord in `path`; a bad CRC or a cut record fails
// the test with the record's index.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    const size_t index = records.size();
    if (file.size() - at < 12) {
      ADD_FAILURE() << "record " << index << ": header cut at byte " << at;
      break;
    }
    const std::string length_bytes = file.substr(at, 8);
    const uint64_t length = little_endian(file, at, 8);
    EXPECT_EQ(little_endian(file, at + 8, 4), reference_masked(length_bytes))
        << "record " << index << ": length CRC";
    at += 12;
    if (file.size() - at < length + 4) {
      ADD_FAILURE() << "record " << index << ": " << length << " bytes announced, file ends first";
      break;
    }
    std::string data = file.substr(at, length);
    EXPECT_EQ(little_endian(file, at + length, 4), reference_masked(data))
        << "record " << index << ": data CRC";
    at += length + 4;
    records.push_back(std::move(data));
  }
  return records;
}

struct Field {
  uint64_t number = 0;
  uint64_t wire_type = 0;
  uint64_t value = 0;  // varint, fixed64 and fixed32 values
  std::string bytes;   // length-delimited values
};

uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const auto b = static_cast<unsigned char>(s.at(at++));
    v |= static_cast<uint64_t>(b & 0x7FU) << shift;
    if ((b & 0x80U) == 0) return v;
  }
  ADD_FAILURE() << "varint longer than 10 bytes";
  return v;
}

std::vector<Field> parse_fields(const std::string& message) {
  std::vector<Field> fields;
  size_t at = 0;
  while (at < message.size()) {
    Field f;
    const uint64_t key = read_varint(message, at);
    f.number = key >> 3;
    f.wire_type = key & 7U;
    switch (f.wire_type) {
      case 0:
        f.value = read_varint(message, at);
        break;
      case 1:
        f.value = little_endian(message, at, 8);
        at += 8;
        break;
      case 5:
        f.value = little_endian(message, at, 4);
        at += 4;
        break;
      case 2: {
        const uint64_t n = read_varint(message, at);
        f.bytes = message.substr(at, n);
        at += n;
        break;
      }
      default:
        ADD_FAILURE() << "unexpected wire type " << f.wire_type;
        return fields;
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

struct DecodedEvent {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;
};

// tensorflow.Event: wall_time 1 (double), step 2 (int64), file_version 3,
// summary 5 { value 1 { tag 1, simple_value 2 (float) } }.
DecodedEvent decode_event(const std::string& data) {
  DecodedEvent e;
  for (const Field& f : parse_fields(data)) {
    if (f.number == 1 && f.wire_type == 1) std::memcpy(&e.wall_time, &f.value, 8);
    if (f.number == 2 && f.wire_type == 0) e.step = static_cast<int64_t>(f.value);
    if (f.number == 3 && f.wire_type == 2) e.file_version = f.bytes;
    if (f.number != 5 || f.wire_type != 2) continue;
    for (const Field& value : parse_fields(f.bytes)) {
      EXPECT_EQ(value.number, 1u);
      std::string tag;
      float simple = 0.0F;
      bool has_simple = false;
      for (const Field& v : parse_fields(value.bytes)) {
        if (v.number == 1 && v.wire_type == 2) tag = v.bytes;
        if (v.number == 2 && v.wire_type == 5) {
          const auto bits = static_cast<uint32_t>(v.value);
          std::memcpy(&simple, &bits, 4);
          has_simple = true;
        }
      }
      EXPECT_TRUE(has_simple) << tag;
      EXPECT_EQ(e.scalars.count(tag), 0u) << tag << " twice in one event";
      e.scalars[tag] = simple;
    }
  }
  return e;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) {
      out.push_back(entry.path());
    }
  }
  return out;
}

// --- tests ------------------------------------------------------------------

TEST(TensorBoardDecoder, Crc32cHasTheStandardCheckValue) {
  EXPECT_EQ(reference_crc32c("123456789"), 0xE3069283U);
}

class TensorBoardTest : public TrainFixture {};

TEST_F(TensorBoardTest, RecordsAreCompleteBeforeTheWriterCloses) {
  const fs::path dir = dir_ / "tb";
  TensorBoardWriter writer(dir);
  writer.write_scalars(7, {{"a/x", 1.5}, {"a/y", -2.25}});
  // Still open: what a killed run would leave behind.
  const auto files = event_files(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.front().string(), writer.path().string());
  const auto records = read_records(writer.path());
  ASSERT_EQ(records.size(), 2u);
  const DecodedEvent first = decode_event(records[0]);
  EXPECT_EQ(first.file_version, "brain.Event:2");
  EXPECT_TRUE(first.scalars.empty());
  const DecodedEvent second = decode_event(records[1]);
  EXPECT_EQ(second.step, 7);
  EXPECT_EQ(second.scalars, (std::map<std::string, float>{{"a/x", 1.5F}, {"a/y", -2.25F}}));
  EXPECT_GT(second.wall_time, 1.6e9);  // seconds since 1970: written after 2020
  EXPECT_GE(second.wall_time, first.wall_time);
}

// A recipe's metrics beside the loss (DPO's, GRPO's rewards and phase times)
// are plotted as metrics.jsonl has them; a validation without a loss (GRPO's
// scores generations: its loss is NaN) plots its metrics only.
TEST_F(TensorBoardTest, ObjectiveMetricsArePlottedAndALosslessValidationHasNoLoss) {
  const fs::path dir = dir_ / "tb";
  TensorBoardWriter writer(dir);
  StepMetrics step;
  step.step = 3;
  step.loss = 0.25;
  step.objective_metrics = {{"loss", 0.25}, {"reward_mean", 0.5}, {"generation_s", 1.5}};
  writer.write(step);
  ValMetrics val;
  val.step = 3;
  val.loss = std::nan("");
  val.valid_tokens = 10;
  val.objective_metrics = {{"loss", val.loss}, {"accuracy", 0.75}};
  writer.write(val);
  const auto records = read_records(writer.path());
  ASSERT_EQ(records.size(), 3u);
  const auto train_scalars = decode_event(records[1]).scalars;
  EXPECT_EQ(train_scalars.at("train/reward_mean"), 0.5F);
  EXPECT_EQ(train_scalars.at("train/generation_s"), 1.5F);
  EXPECT_EQ(train_scalars.at("train/loss"), 0.25F);
  EXPECT_EQ(decode_event(records[2]).scalars,
            (std::map<std::string, float>{{"validation/valid_tokens", 10.0F}, {"validation/accuracy", 0.75F}}));
}

TEST_F(TensorBoardTest, TheDecoderRejectsACorruptedRecord) {
  const fs::path dir = dir_ / "tb";
  fs::path path;
  {
    TensorBoardWriter writer(dir);
    writer.write_scalars(1, {{"a/x", 1.0}});
    path = writer.path();
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 6] ^= 0x01;  // inside the last record's float
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    read_records(path);
  }
  ASSERT_EQ(failures.size(), 1);
  EXPECT_THAT(failures.GetTestPartResult(0).message(), ::testing::HasSubstr("record 1: data CRC"));
}

TEST_F(TensorBoardTest, TrainingRunLogsTheMetricsJsonlValues) {
  RunOptions run;
  run.quiet = true;
  run.write_logs = true;
  const TrainResult r =
      train(make_config({"logger.tensorboard_enabled=true", "sft.max_num_steps=4",
                         "sft.val_period=2", "sft.val_batches=1", "sft.val_global_batch_size=4",
                         "sft.val_micro_batch_size=2"}),
            world_mesh(), run);
  ASSERT_EQ(r.steps.size(), 4u);

  const auto files = event_files(fs::path(log_dir()) / "tensorboard");
  ASSERT_EQ(files.size(), 1u);
  const auto records = read_records(files.front());
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(decode_event(records.front()).file_version, "brain.Event:2");
  std::vector<DecodedEvent> events;
  for (size_t i = 1; i < records.size(); ++i) events.push_back(decode_event(records[i]));

  // The same run's metrics.jsonl, record by record in the order written.
  std::ifstream jsonl(log_dir() + "/metrics.jsonl");
  std::vector<nlohmann::json> logged;
  for (std::string line; std::getline(jsonl, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["split"] != "setup" && j["split"] != "run") logged.push_back(std::move(j));  // not step records
  }
  ASSERT_EQ(logged.size(), 6u);  // 4 steps, validations after steps 2 and 4
  ASSERT_EQ(events.size(), logged.size());
  const std::vector<std::string> train_keys = {"loss",        "grad_norm",         "lr",
                                               "tokens",      "valid_tokens",      "tokens_per_s",
                                               "step_time_s", "comm_wait_s", "peak_rss_bytes_max",
                                               "inter_node_bytes"};
  for (size_t i = 0; i < logged.size(); ++i) {
    const auto& j = logged[i];
    const DecodedEvent& e = events[i];
    EXPECT_EQ(e.step, j["step"].get<int64_t>()) << j.dump();
    std::map<std::string, float> expected;
    if (j["split"] == "train") {
      // Every rank's figures only at steps that gathered them: here the
      // run's first and last (logger.rank_metrics_period 10 > 4 steps).
      const int64_t step = j["step"].get<int64_t>();
      EXPECT_EQ(j.contains("peak_rss_bytes_max"), step == 1 || step == 4) << j.dump();
      for (const auto& key : train_keys) {
        if (j.contains(key)) expected["train/" + key] = j[key].get<float>();
      }
    } else {
      expected["validation/val_loss"] = j["loss"].get<float>();
      expected["validation/valid_tokens"] = j["valid_tokens"].get<float>();
    }
    EXPECT_EQ(e.scalars, expected) << j.dump();
  }
}

TEST_F(TensorBoardTest, OffByDefault) {
  RunOptions run;
  run.quiet = true;
  run.write_logs = true;
  train(make_config({"sft.max_num_steps=1"}), world_mesh(), run);
  EXPECT_TRUE(fs::exists(log_dir() + "/metrics.jsonl"));
  EXPECT_FALSE(fs::exists(fs::path(log_dir()) / "tensorboard"));
}

}  // namespace
}  // namespace tessel::train
