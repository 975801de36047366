// libFuzzer target: arbitrary bytes as an mmdet3d info file (the importers' numpy mode of the
// pickle reader, record mode, then the info checks), with and without the valid flag. Any input
// must end in an imported sub-dataset or a ScenarioError: no crash, no hang, no unbounded
// allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "importers/mmdet3d_infos.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (const bool valid_flag : {true, false}) {
    petrsim::Mmdet3dInfosOptions options;
    options.use_valid_flag = valid_flag;
    try {
      const petrsim::ImportedSubDataset imported = petrsim::ParseMmdet3dInfos(bytes, "fuzz", options);
      (void)imported;
    } catch (const petrsim::ScenarioError&) {
    }
  }
  return 0;
}
