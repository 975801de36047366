// A stuck getitem in the user's terms; see stuck_getitem.h.
#include "data/stuck_getitem.h"

#include <fmt/format.h>

namespace petrsim {

std::string StuckGetitem::Describe() const {
  return fmt::format(
      "rank {}, {} {}: the resample loop of batch {} slot {} (index {}, sampler group {}) {} after {} load(s): "
      "sub-dataset '{}', scene '{}', its pool is frames {}..{} of the scene (dataset indices {}..{}){}",
      rank, worker < 0 ? "main process" : "worker", worker < 0 ? std::string() : std::to_string(worker), batch, slot,
      index, group, proven ? "can never end" : "passed the watchdog's bound", attempts, subdataset_name, scene_name,
      pool_first_in_scene, pool_last_in_scene, pool_first, pool_last, proven ? ", none with GT after the filters" : "");
}

}  // namespace petrsim
