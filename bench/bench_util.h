// Small helpers the benchmark programs share: timing, CPU time, the process's
// memory from /proc, and medians. Header-only; bench/*.cpp are separate
// programs.
#pragma once

#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of this process, all threads (ATen's and MPI's; a rank waiting
// in a collective spins, so waiting counts too). On a shared machine wall time
// mostly measures the other jobs, CPU time what this one needed.
inline double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// A "VmHWM:   1234 kB" style field of /proc/self/status, in bytes (-1: absent).
inline int64_t proc_status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so each case reports its own
// peak; false when the kernel refuses.
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

inline std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Now, as "2026-11-30T14:08:43Z".
inline std::string utc_timestamp() {
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

inline std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// The source tree (configs the benchmarks read): $TESSEL_SOURCE_DIR, else ".".
inline std::string source_dir() {
  const char* s = std::getenv("TESSEL_SOURCE_DIR");
  return s != nullptr ? s : ".";
}

}  // namespace tessel::bench
