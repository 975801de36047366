// The machine petrsim runs on, as far as its limits need it: half its physical memory is the
// default --memory-max (check/memory_estimate.h compares estimates with it). Kept in base/, the
// one floor that may ask the machine, so that check/ stays a function of the scenario alone.
#pragma once

#include <cstdint>
#include <string>

namespace petrsim {

// Half of this machine's physical memory (4 GiB when the system does not say): the default
// --memory-max.
uint64_t DefaultMemoryMax();

// "16.0 GiB", "512.0 MiB", "1234 B": a memory figure in an error or a report (the estimates of
// check/memory_estimate.h, the size limits of scenario validation).
std::string FormatBytes(uint64_t bytes);

}  // namespace petrsim
