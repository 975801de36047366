// The first piece of the real backend: a c10d ProcessGroupGloo over a TCPStore on loopback,
// used to prove the LibTorch/c10d/Gloo toolchain links and runs a real collective. The trainer
// of the real-backend issue builds on the same setup. This header includes no LibTorch header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace petrsim::real {

// The LibTorch version this was built against, e.g. "1.13.0".
std::string LibTorchVersion();

// Runs `world_size` ranks as threads of this process, each with its own ProcessGroupGloo
// joined through a c10d TCPStore on 127.0.0.1:`port` (0: pick a free port), and all-reduces
// (sum) a float tensor holding rank + 1 on each rank. Returns every rank's result.
// Throws std::runtime_error on any c10d error (with its message).
std::vector<float> GlooAllReduceSum(int world_size, uint16_t port, int64_t timeout_ms);

}  // namespace petrsim::real
