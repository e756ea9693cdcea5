#include "cli/environment_check.h"

#include "dist/algorithms.h"
#include "dist/device_world.h"
#include "dist/progress_engine.h"
#include "dist/timeout.h"
#include "nn/device_kernels.h"
#include "nn/onednn_sgemm.h"
#include "train/profiled_step.h"

namespace tessel::cli {

void check_tessel_environment() {
  (void)nn::onednn_sgemm_preferred();          // TESSEL_GEMM
  (void)nn::device_kernels_enabled();          // TESSEL_DEVICE_KERNELS
  (void)train::profile_step_from_env();        // TESSEL_PROFILE_STEP
  (void)dist::algorithms();                    // TESSEL_ALLREDUCE_ALGO, TESSEL_REDUCE_SCATTER_ALGO
  (void)dist::engine_nice();                   // TESSEL_ENGINE_NICE
  (void)dist::default_collective_timeout();    // TESSEL_COLLECTIVE_TIMEOUT_S
  (void)dist::device_environment();  // TESSEL_DEVICE, TESSEL_COMM, TESSEL_ALLOW_SHARED_GPU
}

}  // namespace tessel::cli
