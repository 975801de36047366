// ProcessGroupGloo smoke collective; see gloo_comm_check.h.
#include "real/gloo_comm_check.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

namespace petrsim::real {

std::string LibTorchVersion() { return TORCH_VERSION; }

std::vector<float> GlooAllReduceSum(int world_size, uint16_t port, int64_t timeout_ms) {
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  c10d::TCPStoreOptions server_options;
  server_options.port = port;
  server_options.isServer = true;
  server_options.numWorkers = world_size;
  server_options.waitWorkers = false;
  server_options.timeout = timeout;
  auto server = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options);
  const uint16_t bound_port = server->getPort();

  std::vector<float> results(world_size, 0.0f);
  std::vector<std::exception_ptr> errors(world_size);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        c10d::TCPStoreOptions client_options;
        client_options.port = bound_port;
        client_options.isServer = false;
        client_options.timeout = timeout;
        auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client_options);
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        options->devices.push_back(
            c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        c10d::ProcessGroupGloo group(store, rank, world_size, options);
        std::vector<at::Tensor> tensors = {torch::full({1}, static_cast<float>(rank + 1))};
        group.allreduce(tensors)->wait();
        results[rank] = tensors[0].item<float>();
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

}  // namespace petrsim::real
