// TensorBoard event files for a run (logger.tensorboard_enabled): the scalars
// of metrics.jsonl written so `tensorboard --logdir <logger.log_dir>` plots
// them without any conversion step. The file format is small and stable, so
// it is written by hand instead of pulling in protobuf: a TFRecord stream
// (each record: uint64 length, masked CRC32C of the length, the bytes, masked
// CRC32C of the bytes) of serialized tensorflow.Event messages, the first one
// carrying file_version "brain.Event:2". Every record is flushed, so a killed
// run keeps what it logged. Only rank 0 constructs one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "train/metrics.h"

namespace tessel::train {

class TensorBoardWriter {
 public:
  // Creates `dir` and a new events.out.tfevents.<unix seconds>.<hostname>
  // in it (a resumed run adds a file; TensorBoard reads them together).
  explicit TensorBoardWriter(const std::filesystem::path& dir);

  // One Event at `step` whose Summary holds every (tag, value), stored as
  // float32 (TensorBoard's simple_value).
  void write_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  // The values of metrics.jsonl's train and val records: train/<key> for a
  // step, validation/val_loss (the reference's tag) for a validation.
  void write(const StepMetrics& m);
  void write(const ValMetrics& m);

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace tessel::train
