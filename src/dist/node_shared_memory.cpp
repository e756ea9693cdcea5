#include "dist/node_shared_memory.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/error.h"

namespace tessel::dist {
namespace {

constexpr size_t kHostBytes = 64;
constexpr size_t kNameBytes = 64;
// The token sits in the first page; the data starts at the second, so it is
// page-aligned.
constexpr size_t kHeaderBytes = 4096;

// What rank 0 tells the others, broadcast as bytes.
struct Announcement {
  int32_t error = 0;  // errno of rank 0's failure, 0: created
  uint64_t token = 0;
  char name[kNameBytes] = {};
};

struct Mapping {
  void* base;
  size_t length;
};

void unmap(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  munmap(m->base, m->length);
  delete m;
}

std::string host_name() {
  char name[kHostBytes] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

uint64_t free_shm_bytes() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

// Rank 0: a new segment of `length` bytes with every page reserved, or the errno.
int create(const char* name, size_t length, uint64_t token) {
  const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return errno;
  int error = ftruncate(fd, static_cast<off_t>(length)) == 0 ? 0 : errno;
  if (error == 0) error = posix_fallocate(fd, 0, static_cast<off_t>(length));
  if (error == 0 && pwrite(fd, &token, sizeof(token), 0) != static_cast<ssize_t>(sizeof(token))) error = errno;
  close(fd);
  if (error != 0) shm_unlink(name);
  return error;
}

// Maps the segment and checks rank 0's token; null when it is not ours.
void* map(const char* name, size_t length, uint64_t token, int* error) {
  const int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) {
    *error = errno;
    return nullptr;
  }
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  *error = base == MAP_FAILED ? errno : 0;
  close(fd);
  if (base == MAP_FAILED) return nullptr;
  uint64_t seen = 0;
  std::memcpy(&seen, base, sizeof(seen));
  if (seen != token) {
    munmap(base, length);
    *error = EEXIST;
    return nullptr;
  }
  return base;
}

}  // namespace

c10::DataPtr allocate_node_shared(Communicator& comm, size_t bytes, const std::string& purpose) {
  // Every member on rank 0's machine?
  const std::string host = host_name();
  at::Tensor mine = at::zeros({static_cast<int64_t>(kHostBytes)}, at::kByte);
  std::memcpy(mine.data_ptr(), host.data(), std::min(host.size(), kHostBytes - 1));
  at::Tensor hosts = at::empty({comm.size() * static_cast<int64_t>(kHostBytes)}, at::kByte);
  comm.all_gather_into(hosts, mine);
  for (int r = 0; r < comm.size(); ++r) {
    const char* other = reinterpret_cast<const char*>(hosts.data_ptr<uint8_t>()) + r * kHostBytes;
    if (std::strncmp(other, host.c_str(), kHostBytes) != 0) {
      throw UsageError(fmt::format(
          "{}: the ranks of group '{}' run on more than one machine ('{}' and '{}'), and memory can "
          "only be shared within one; use HSDP (policy.dtensor_cfg.dp_replicate_size = the number of "
          "nodes) so that each shard group is one node, or turn the option off",
          purpose, comm.name(), host, std::string(other, strnlen(other, kHostBytes))));
    }
  }

  const size_t length = kHeaderBytes + bytes;
  Announcement note;
  if (comm.rank() == 0) {
    static std::atomic<uint64_t> segments{0};
    std::snprintf(note.name, sizeof(note.name), "/tessel-%d-%llu", static_cast<int>(getpid()),
                  static_cast<unsigned long long>(segments.fetch_add(1)));
    note.token = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(getpid());
    note.error = create(note.name, length, note.token);
  }
  at::Tensor wire = at::empty({static_cast<int64_t>(sizeof(Announcement))}, at::kByte);
  std::memcpy(wire.data_ptr(), &note, sizeof(note));
  comm.broadcast(wire, 0);
  std::memcpy(&note, wire.data_ptr(), sizeof(note));
  if (note.error != 0) {
    throw UsageError(fmt::format(
        "{}: cannot reserve {:.1f} MiB of shared memory in /dev/shm ({}; {:.1f} MiB free there): "
        "give the machine a larger /dev/shm (a container: docker run --shm-size=...) or turn the "
        "option off",
        purpose, static_cast<double>(length) / (1 << 20), std::strerror(note.error),
        static_cast<double>(free_shm_bytes()) / (1 << 20)));
  }

  int error = 0;
  void* base = map(note.name, length, note.token, &error);
  at::Tensor failed = at::full({1}, base == nullptr ? 1 : 0, at::kInt);
  comm.all_reduce(failed, ReduceOp::Max);
  // Everyone has mapped it (or failed): the name is not needed any more.
  if (comm.rank() == 0) shm_unlink(note.name);
  if (failed.item<int>() != 0) {
    if (base != nullptr) munmap(base, length);
    throw UsageError(fmt::format("{}: a rank of group '{}' could not map the shared segment {} ({})",
                                 purpose, comm.name(), note.name,
                                 error != 0 ? std::strerror(error) : "failed on another rank"));
  }
  void* data = static_cast<char*>(base) + kHeaderBytes;
  return {data, new Mapping{base, length}, &unmap, c10::Device(c10::DeviceType::CPU)};
}

}  // namespace tessel::dist
