// The shared-memory copy choice (dist/shared_memory_copy.h): the probe's
// answer is checked against what it stands for, one process reading a
// sibling's memory (as MPI ranks are siblings under mpirun), tried here with
// two forked children; a value the user set is never replaced.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "dist/shared_memory_copy.h"

namespace {

constexpr const char* kVariable = "OMPI_MCA_btl_vader_single_copy_mechanism";

// Child A writes a message into its copy of `buffer` and waits; child B reads
// it from A's memory with process_vm_readv. True when B read A's message.
bool sibling_can_read_sibling() {
  static char buffer[32] = "written by the parent";
  int ready[2];
  if (::pipe(ready) != 0) return false;
  const pid_t a = ::fork();
  if (a == 0) {
    std::strcpy(buffer, "written by child a");
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  const pid_t b = ::fork();
  if (b == 0) {
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) ::_exit(2);
    char seen[32] = {};
    iovec local{seen, sizeof(seen)};
    iovec remote{buffer, sizeof(buffer)};
    const ssize_t n = ::process_vm_readv(a, &local, 1, &remote, 1, 0);
    ::_exit(n == static_cast<ssize_t>(sizeof(seen)) && std::strcmp(seen, "written by child a") == 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(b, &status, 0);
  ::kill(a, SIGKILL);
  ::waitpid(a, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(SharedMemoryCopy, ProbeAgreesWithASiblingReadingASibling) {
  EXPECT_EQ(tessel::dist::cross_process_copy_allowed(), sibling_can_read_sibling());
}

TEST(SharedMemoryCopy, ChoosesCmaExactlyWhereItWorksAndKeepsTheUsersValue) {
  const char* before = std::getenv(kVariable);
  const std::string saved = before ? before : "";
  ::unsetenv(kVariable);
  const std::string chosen = tessel::dist::choose_shared_memory_copy();
  EXPECT_EQ(chosen, sibling_can_read_sibling() ? "cma" : "none");
  EXPECT_EQ(std::string(std::getenv(kVariable)), chosen);  // MPI_Init reads it from the environment
  for (const char* users : {"none", "cma", "xpmem"}) {
    ::setenv(kVariable, users, 1);
    EXPECT_EQ(std::string(tessel::dist::choose_shared_memory_copy()), users);
    EXPECT_EQ(std::string(std::getenv(kVariable)), users);
  }
  if (before) ::setenv(kVariable, saved.c_str(), 1);
  else ::unsetenv(kVariable);
}

TEST(SharedMemoryCopy, CopiesPerTransferFollowTheMechanism) {
  const char* before = std::getenv(kVariable);
  const std::string saved = before ? before : "";
  ::setenv(kVariable, "none", 1);
  EXPECT_EQ(tessel::dist::shared_memory_copies_per_transfer(), 2);
  ::setenv(kVariable, "cma", 1);
  EXPECT_EQ(tessel::dist::shared_memory_copies_per_transfer(), 1);
  ::unsetenv(kVariable);
  EXPECT_EQ(tessel::dist::shared_memory_copies_per_transfer(), sibling_can_read_sibling() ? 1 : 2);
  if (before) ::setenv(kVariable, saved.c_str(), 1);
}

}  // namespace
