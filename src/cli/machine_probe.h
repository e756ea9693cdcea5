// A short measurement of this machine for `tessel plan --predict`'s defaults
// (well under a second): one thread's fp32 GEMM rate, the memory copy rate
// (what shared-memory transfers between ranks of a node run at) and the
// TCP loopback rate (what an unthrottled link between pretend nodes runs
// at), and the resident memory of a process that has loaded tessel's
// libraries (the floor under every rank's RSS).
#pragma once

#include <cstdint>
#include <optional>

#include "models/model_config.h"

namespace tessel::cli {

// Each measures on demand (only what the caller was not given), on one
// thread; the figures it returns:
double gemm_gflops();     // fp32, 512^3
double copy_gbytes_s();   // memcpy of 64 MiB
double tcp_gbytes_s();    // 64 MiB through a loopback TCP connection; 0 without sockets
int64_t runtime_rss_bytes();  // this process now (VmRSS): call before the others, whose buffers it would count

// Seconds one rank spends on the forward and backward of one micro batch of
// `model` with tensor parallelism `tp`, measured here on one thread: a
// model of 1 and of 2 decoder layers with tp-local widths (heads,
// intermediate size and vocabulary divided by tp) gives the per-layer and
// the rest's time, scaled to the model's layers. Not measured (nullopt)
// when a layer would need more than `max_layer_bytes`: then the caller
// falls back to the GEMM rate.
std::optional<double> measure_micro_batch_compute_s(const models::ModelConfig& model, int tp, int64_t micro_batch,
                                                    int64_t seq_len, int64_t max_layer_bytes = int64_t{1} << 29);

}  // namespace tessel::cli
