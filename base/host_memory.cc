// This machine's memory; see host_memory.h.
#include "base/host_memory.h"

#include <unistd.h>

namespace petrsim {

uint64_t DefaultMemoryMax() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 4ull << 30;  // unknown: 4 GiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

}  // namespace petrsim
