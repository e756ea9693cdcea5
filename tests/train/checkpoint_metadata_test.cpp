// metadata.json read and checked (train/checkpoint_metadata.h): what tessel
// writes parses to the values written, and each field that is missing, of
// the wrong type or out of range is refused with the file, the field and
// the value named. Files are not touched: these are the parser's checks,
// the ones before any file of the step is opened.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/checkpoint_metadata.h"

namespace tessel::train {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kSource = "/ckpt/step_10/metadata.json";

// As save_checkpoint writes it for a 4-rank run with tp 2.
json valid() {
  return json::parse(R"({
    "format": "tessel-checkpoint-2", "step": 10, "world_size": 4, "tp_size": 2,
    "mesh": "dp_shard 2 x tp 2", "optimizer_step": 10, "has_optimizer": true,
    "sampler": {"epoch": 1, "position": 8, "seed": 42, "dataset_size": 24},
    "metrics": {"train:loss": 1.5, "val:val_loss": null},
    "shapes": {"w": [8, 4], "gate_up": [16, 4], "norm": [4], "scale": []},
    "tp_sharded": {"w": {"dim": 0, "packed_parts": 1}, "gate_up": {"dim": 0, "packed_parts": 2}},
    "files": {"rank_0.safetensors": {"bytes": 1000, "xxh64": "00ff00ff00ff00ff"},
              "config.json": {"bytes": 12, "xxh64": "0123456789abcdef"}}
  })");
}

std::string refusal(const json& meta) {
  try {
    parse_checkpoint_metadata(meta.dump(), kSource);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << meta.dump();
  return "";
}

TEST(CheckpointMetadata, WhatTesselWritesParsesToItsValues) {
  const CheckpointMetadata m = parse_checkpoint_metadata(valid().dump(), kSource);
  EXPECT_EQ(m.step, 10);
  EXPECT_EQ(m.world_size, 4);
  EXPECT_EQ(m.tp_size, 2);
  EXPECT_EQ(m.mesh, "dp_shard 2 x tp 2");
  EXPECT_EQ(m.optimizer_step, 10);
  EXPECT_TRUE(m.has_optimizer);
  EXPECT_EQ(m.sampler.epoch, 1);
  EXPECT_EQ(m.sampler.position, 8);
  EXPECT_EQ(m.sampler.seed, 42u);
  EXPECT_EQ(m.sampler.dataset_size, 24);
  EXPECT_EQ(m.metrics, (std::map<std::string, double>{{"train:loss", 1.5}}));  // null: NaN, absent
  EXPECT_EQ(m.shapes.at("gate_up"), (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(m.shapes.at("scale"), std::vector<int64_t>{});
  EXPECT_EQ(m.tp_sharded.at("gate_up").packed_parts, 2);
  ASSERT_TRUE(m.files.has_value());
  EXPECT_EQ(m.files->at("rank_0.safetensors"), (io::FileDigest{1000, 0x00ff00ff00ff00ffULL}));
  EXPECT_EQ(m.files->at("config.json"), (io::FileDigest{12, 0x0123456789abcdefULL}));
  // The manifest round-trips through its JSON.
  EXPECT_EQ(manifest_from_json(manifest_to_json(*m.files)), *m.files);
}

TEST(CheckpointMetadata, FileNamesOutsideTheStepAreRefusedByName) {
  struct Case {
    std::string name, shown, why;
  };
  const std::vector<Case> cases = {
      {"../../../../etc/hostname", "\"../../../../etc/hostname\"",
       "it climbs out of the directory with '..'"},
      {"/etc/hostname", "\"/etc/hostname\"", "it is an absolute path"},
      {std::string("config.json\0x", 13), "\"config.json\\u0000x\"", "it contains a NUL byte"},
      {"sub/rank_0.safetensors", "\"sub/rank_0.safetensors\"", "it contains '/'"},
      {"..", "\"..\"", "'..' is a directory"},
      {".", "\".\"", "'.' is a directory"},
      {"", "\"\"", "it is empty"},
  };
  for (const auto& c : cases) {
    json meta = valid();
    meta["files"][c.name] = {{"bytes", 10}, {"xxh64", "0000000000000000"}};
    const std::string message = refusal(meta);
    EXPECT_THAT(message,
                HasSubstr(kSource + ": \"files\" names " + c.shown +
                          ", which is not a file name inside the step directory: " + c.why))
        << c.shown;
    // The same check for the list alone (what the check before a load reads).
    try {
      manifest_of_metadata(json{{"files", meta["files"]}}.dump(), kSource);
      ADD_FAILURE() << c.shown << " accepted in the list alone";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr("names " + c.shown)) << c.shown;
    }
  }
}

TEST(CheckpointMetadata, MalformedFieldsAreNamed) {
  struct Case {
    std::function<void(json&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](json& m) { m.erase("format"); }, "has no \"format\""},
      {[](json& m) { m["format"] = "tessel-checkpoint-3"; },
       "\"format\" is \"tessel-checkpoint-3\", expected \"tessel-checkpoint-2\""},
      {[](json& m) { m.erase("step"); }, "has no \"step\""},
      {[](json& m) { m["step"] = -1; }, "\"step\" is -1, expected an integer from 0 to"},
      {[](json& m) { m["world_size"] = "4"; },
       "\"world_size\" is \"4\", expected an integer from 1 to 2147483647"},
      {[](json& m) { m["world_size"] = 0; }, "\"world_size\" is 0"},
      {[](json& m) { m["world_size"] = 1e300; }, "\"world_size\" is 1e+300"},
      {[](json& m) { m["tp_size"] = 8; }, "\"tp_size\" is 8, expected an integer from 1 to 4"},
      {[](json& m) {
         m["world_size"] = 6;
         m["tp_size"] = 4;
       },
       "\"tp_size\" 4 does not divide \"world_size\" 6"},
      {[](json& m) { m["has_optimizer"] = 1; }, "\"has_optimizer\" is 1, expected true or false"},
      {[](json& m) { m["optimizer_step"] = 2.5; }, "\"optimizer_step\" is 2.5"},
      {[](json& m) { m["sampler"] = "x"; }, "\"sampler\" is \"x\", expected a JSON object"},
      {[](json& m) { m["sampler"]["position"] = -8; }, "\"sampler\"'s \"position\" is -8"},
      {[](json& m) { m["sampler"]["seed"] = -1; }, "\"sampler\"'s \"seed\" is -1"},
      {[](json& m) { m["metrics"]["train:loss"] = "low"; },
       "the metric 'train:loss' in \"metrics\" is \"low\", expected a number or null"},
      {[](json& m) {
         m["shapes"]["w"] = {8, -4};
       },
       "the shape of 'w' in \"shapes\" holds a size that is -4"},
      {[](json& m) { m["shapes"]["w"] = "8x4"; },
       "the shape of 'w' in \"shapes\" is \"8x4\", expected a list"},
      {[](json& m) {
         m["shapes"]["w"] = {4294967296LL, 4294967296LL};
       },
       "the shape of 'w' in \"shapes\" is [4294967296,4294967296]: more elements than a tensor can "
       "hold"},
      {[](json& m) {
         m["tp_sharded"]["lost"] = {{"dim", 0}, {"packed_parts", 1}};
       },
       "\"tp_sharded\" names 'lost', which has no shape in \"shapes\""},
      {[](json& m) { m["tp_sharded"]["w"]["dim"] = 2; },
       "\"tp_sharded\"'s 'w' \"dim\" is 2, expected an integer from 0 to 1"},
      {[](json& m) { m["tp_sharded"]["w"]["packed_parts"] = 3; },
       "\"tp_sharded\"'s 'w': \"packed_parts\" 3 does not divide its size 8 along dim 0"},
      {[](json& m) {
         m["tp_sharded"]["scale"] = {{"dim", 0}, {"packed_parts", 1}};
       },
       "\"tp_sharded\"'s 'scale': a scalar cannot be split over tp"},
      {[](json& m) { m["files"] = json::array(); }, "\"files\" is [], expected a JSON object"},
      {[](json& m) { m["files"]["config.json"]["bytes"] = -12; },
       "the \"files\" entry \"config.json\"'s \"bytes\" is -12"},
      {[](json& m) { m["files"]["config.json"].erase("xxh64"); },
       "the \"files\" entry \"config.json\" has no \"xxh64\""},
      // Sixteen characters std::stoull would have read as a number.
      {[](json& m) { m["files"]["config.json"]["xxh64"] = "-000000000000001"; },
       "the \"files\" entry \"config.json\"'s \"xxh64\" is \"-000000000000001\", not 16 hex "
       "digits"},
      {[](json& m) { m["files"]["config.json"]["xxh64"] = "0123456789abcde"; },
       "the \"files\" entry \"config.json\"'s \"xxh64\" is \"0123456789abcde\", not 16 hex digits"},
  };
  for (const auto& c : cases) {
    json meta = valid();
    c.change(meta);
    EXPECT_THAT(refusal(meta), HasSubstr(kSource + ": " + c.expected)) << meta.dump();
  }
}

TEST(CheckpointMetadata, TextThatIsNotAnObjectIsRefused) {
  for (const std::string text : {"{\"step\": 4, \"files\": {", "[1, 2]", "", "1e99999"}) {
    try {
      parse_checkpoint_metadata(text, kSource);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(kSource)) << text;
    }
  }
}

TEST(CheckpointMetadata, TheListAloneIsOptional) {
  EXPECT_FALSE(manifest_of_metadata(R"({"step": 3})", kSource).has_value());
  json meta = valid();
  meta.erase("files");
  EXPECT_FALSE(parse_checkpoint_metadata(meta.dump(), kSource).files.has_value());
}

}  // namespace
}  // namespace tessel::train
