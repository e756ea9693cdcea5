// GoogleTest entry point for every tessel test binary. Under mpirun each rank
// runs all tests; rank 0 prints the usual report, the other ranks print only
// their failures (prefixed with the rank), so a 4-rank run reads like one.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/log.h"
#include "dist/communicator.h"

namespace {

class FailuresOnlyPrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailuresOnlyPrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto world = tessel::dist::world();
  tessel::log::set_rank(world->rank(), world->size());
  if (world->rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnlyPrinter(world->rank()));
  }
  int result = RUN_ALL_TESTS();
  tessel::dist::shutdown();
  return result;
}
