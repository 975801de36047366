// The plan's values as the bytes a GPU collective reads and writes (the NCCL backend stages them
// to and from the device): each value in the collective's dtype, little-endian as CUDA lays them
// out, float16 as IEEE binary16 and bfloat16 as the top half of a float32. No CUDA here, so the
// conversions are tested on any machine. Pure functions; safe to call from any thread.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "plan/ddp_plan.h"
#include "proto/scenario.pb.h"

namespace petrsim::real {

// The bytes one value of `dtype` takes (the plan's own).
using petrsim::DtypeBytes;

// Writes `values`, each converted to `dtype` first (comm::ToDtype: rounded, truncated or wrapped as
// c10d converts), into `out`, which holds exactly DtypeBytes(dtype) * values.size() bytes.
void EncodeValues(Collective::Dtype dtype, std::span<const double> values, std::span<std::byte> out);

// The values `bytes` hold in `dtype` (a whole number of them), as doubles.
std::vector<double> DecodeValues(Collective::Dtype dtype, std::span<const std::byte> bytes);

}  // namespace petrsim::real
