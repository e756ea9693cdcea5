// A fake device for the stream-ordering tests: StreamOps that run nothing and
// record every call in order ("record compute", "wait comm on e1", ...), and
// events whose completion and timing the test sets. What a collective issues
// onto streams is then data a test can compare, on a machine without a GPU.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device/stream_ops.h"

namespace tessel::dist::testing {

class NamedStream : public device::Stream {
 public:
  explicit NamedStream(std::string name) : name_(std::move(name)) {}
  std::string describe() const override { return name_; }

 private:
  std::string name_;
};

class FakeEvent : public device::Event {
 public:
  FakeEvent(std::string name, double at_ms) : name(std::move(name)), at_ms(at_ms) {}
  bool query() override { return passed; }
  void synchronize() override { passed = true; }
  std::string name;
  double at_ms;  // when the stream passes it, for elapsed_ms
  bool passed = false;
};

class RecordingStreams : public device::StreamOps {
 public:
  device::StreamPtr current_stream() override { return compute; }
  device::StreamPtr new_stream() override {
    return std::make_shared<NamedStream>("comm" + std::to_string(++streams_made));
  }
  device::EventPtr record(const device::Stream& stream, bool timing) override {
    auto e = std::make_shared<FakeEvent>("e" + std::to_string(events.size() + 1), clock_ms);
    events.push_back(e);
    log.push_back("record " + stream.describe() + " " + e->name + (timing ? " timed" : ""));
    return e;
  }
  void wait(const device::Stream& stream, const device::Event& event) override {
    log.push_back("wait " + stream.describe() + " on " +
                  dynamic_cast<const FakeEvent&>(event).name);
  }
  double elapsed_ms(const device::Event& from, const device::Event& to) override {
    return dynamic_cast<const FakeEvent&>(to).at_ms - dynamic_cast<const FakeEvent&>(from).at_ms;
  }

  std::shared_ptr<NamedStream> compute = std::make_shared<NamedStream>("compute");
  int streams_made = 0;
  double clock_ms = 0.0;  // the time stamp the next recorded event gets
  std::vector<std::shared_ptr<FakeEvent>> events;
  std::vector<std::string> log;
};

}  // namespace tessel::dist::testing
