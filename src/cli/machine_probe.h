// A short measurement of this machine for `tessel plan --predict`'s defaults
// (a second or two, and seconds more for the model's micro batch): one
// thread's fp32 GEMM rate, the memory copy rate (what shared-memory
// transfers between ranks of a node run at) and the TCP loopback rate (what
// an unthrottled link between pretend nodes runs at, and what moving a byte
// costs the CPU where the transport runs on the ranks' cores), the resident
// memory of a process that has loaded tessel's libraries (the floor under
// every rank's RSS), and the model's own micro batch and optimizer step.
#pragma once

#include <cstdint>
#include <optional>

#include "models/model_config.h"

namespace tessel::cli {

// Each measures on demand (only what the caller was not given), on one
// thread; the figures it returns:
double gemm_gflops();     // fp32, 512^3
double copy_gbytes_s();   // memcpy of 64 MiB
double tcp_gbytes_s();    // 64 MiB through a loopback TCP connection, best of 3; 0 without sockets
int64_t runtime_rss_bytes();  // this process now (VmRSS): call before the others, whose buffers it would count

// Seconds one rank spends on one micro batch of `model` with tensor
// parallelism `tp`, measured here on one thread (libtorch's and the BLAS's):
// a model of 1 and of up to 6 decoder layers with tp-local widths (heads,
// intermediate size and vocabulary divided by tp), each the median of six
// repetitions, gives the per-layer and the rest's time, scaled to the
// model's layers. Not measured (nullopt)
// when a layer would need more than `max_layer_bytes`: then the caller
// falls back to the GEMM rate.
struct MicroBatchTiming {
  double forward_s = 0;  // forward and loss
  double total_s = 0;    // forward, loss and backward
};
std::optional<MicroBatchTiming> measure_micro_batch(const models::ModelConfig& model, int tp, int64_t micro_batch,
                                                    int64_t seq_len, int64_t max_layer_bytes = int64_t{1} << 29);

// Seconds per parameter element of what a step does after backward on each
// rank's fp32 shards: the gradient norm with clipping, AdamW's update and
// freeing the gradients; timed on one thread over 4M elements.
double optimizer_s_per_element();

}  // namespace tessel::cli
