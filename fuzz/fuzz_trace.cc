// libFuzzer target: arbitrary bytes as a petrsim trace file (rank_<r>.pbtrace), read through
// the real file path (a memfd). Any input must end in events or a ScenarioError: no crash, no
// hang, no unbounded allocation; and both readers must read the same number of events.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "trace/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("petrsim_fuzz_trace", 0);
  if (fd < 0) return 0;
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  // Both readers: protobuf's parser and the fast scan diagnose uses; they must agree on how
  // many events a file holds.
  for (const bool partial : {false, true}) {
    uint64_t slow = 0, fast = 0;
    std::string slow_error, fast_error;
    try {
      std::string cut;
      petrsim::ForEachTraceEvent(
          path, [&](const petrsim::TraceEvent&) { ++slow; }, partial ? &cut : nullptr);
      slow_error = cut;
    } catch (const petrsim::ScenarioError& error) {
      slow_error = error.what();
    }
    try {
      std::string cut;
      petrsim::ScanTraceEvents(
          path, [&](const petrsim::TraceEventView&) { ++fast; }, partial ? &cut : nullptr);
      fast_error = cut;
    } catch (const petrsim::ScenarioError& error) {
      fast_error = error.what();
    }
    if (slow_error.empty() != fast_error.empty() || slow != fast) {
      std::fprintf(stderr, "readers disagree: protobuf %llu events, error '%s'; scan %llu events, error '%s'\n",
                   static_cast<unsigned long long>(slow), slow_error.c_str(), static_cast<unsigned long long>(fast),
                   fast_error.c_str());
      __builtin_trap();
    }
  }
  return 0;
}
