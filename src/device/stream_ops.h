// Streams and events of a device, as opaque handles: what communication on a
// device needs to order itself against computation without blocking the host
// (SPEC 10: "waits order streams, not the host thread"). A stream runs the
// work issued to it in order; an event is a point in one stream; a stream can
// be made to wait for an event of another. The CUDA build implements this
// with CUDA streams and events (device/cuda/); tests implement it with a
// recording fake, so the order a collective issues is checked as data on a
// machine without a GPU (tests/dist/stream_ordered_work_test.cpp).
#pragma once

#include <memory>
#include <string>

namespace tessel::device {

class Stream {
 public:
  virtual ~Stream() = default;
  virtual std::string describe() const = 0;
};

class Event {
 public:
  virtual ~Event() = default;
  // Whether the stream has passed this point (never blocks).
  virtual bool query() = 0;
  // Blocks the host until it has.
  virtual void synchronize() = 0;
};

using StreamPtr = std::shared_ptr<Stream>;
using EventPtr = std::shared_ptr<Event>;

class StreamOps {
 public:
  virtual ~StreamOps() = default;
  // The stream the calling thread's computation is issued to now.
  virtual StreamPtr current_stream() = 0;
  // A stream of its own for communication, running beside computation.
  virtual StreamPtr new_stream() = 0;
  // A point in `stream` after everything issued to it so far. With `timing`
  // it can be measured against another timed event (elapsed_ms).
  virtual EventPtr record(const Stream& stream, bool timing = false) = 0;
  // Work issued to `stream` from now on runs only after `event`.
  virtual void wait(const Stream& stream, const Event& event) = 0;
  // Milliseconds from `from` to `to`, both passed and both timed (negative
  // when `to` came first).
  virtual double elapsed_ms(const Event& from, const Event& to) = 0;
};

}  // namespace tessel::device
