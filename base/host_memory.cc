// This machine's memory; see host_memory.h.
#include "base/host_memory.h"

#include <unistd.h>

#include <fmt/format.h>

namespace petrsim {

uint64_t DefaultMemoryMax() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 4ull << 30;  // unknown: 4 GiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1ull << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace petrsim
