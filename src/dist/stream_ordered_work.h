// Collectives on a device stream, ordered against the computation by events
// rather than by blocking the host (SPEC 10, as PyTorch FSDP2 on NCCL):
//
//   issue:  ready = record(compute)     the inputs as computed so far
//           comm.wait(ready)            the collective starts after them
//           launch onto comm            (NCCL's kernels)
//           done = record(comm)
//   wait(): compute.wait(done)          later computation reads the outputs
//
// Memory follows from the order, with no record_stream: the tensors are
// allocated on the compute stream and the collective's Work keeps them alive;
// once wait() has ordered the compute stream after `done`, a tensor freed by
// the host is reused by the caching allocator only for work issued after it
// on the compute stream, and a later collective's stream first waits for
// that. So callers keep the communicator's rule (tensors untouched until
// wait()) and nothing else. The host never blocks here; the CollectiveWatch
// times every collective, and each wait's stall of the compute stream is
// measured by events for comm_wait_s (caller_wait_time.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device/stream_ops.h"
#include "dist/collective_watch.h"
#include "dist/communicator.h"

namespace tessel::dist {

class StreamOrderedWork : public Work {
 public:
  StreamOrderedWork(device::StreamOps& ops, device::EventPtr done, std::vector<at::Tensor> tensors);
  // Orders the calling thread's current stream after the collective; the
  // first call only (later calls find it ordered already).
  void wait() override;
  bool is_completed() override { return done_->query(); }

 private:
  device::StreamOps& ops_;
  device::EventPtr done_;
  std::vector<at::Tensor> tensors_;  // alive until this Work is dropped
  bool waited_ = false;
};

// One group's communication stream.
class CollectiveStream {
 public:
  CollectiveStream(device::StreamOps& ops, std::shared_ptr<CollectiveWatch> watch);

  // Orders `launch` after the computation issued so far, lets it issue the
  // collective onto this stream, and returns the Work that keeps `tensors`
  // alive. `collective` and `group` name it if it times out.
  WorkPtr issue(const char* collective, const std::string& group, std::chrono::milliseconds timeout,
                std::vector<at::Tensor> tensors,
                const std::function<void(const device::Stream&)>& launch);

  const device::Stream& stream() const { return *stream_; }
  device::StreamOps& ops() const { return ops_; }
  const std::shared_ptr<CollectiveWatch>& watch() const { return watch_; }

 private:
  device::StreamOps& ops_;
  device::StreamPtr stream_;
  std::shared_ptr<CollectiveWatch> watch_;
};

}  // namespace tessel::dist
