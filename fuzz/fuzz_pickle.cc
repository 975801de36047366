// libFuzzer target: arbitrary bytes as a Flight Recorder dump (pickle or JSON). Any input must
// end in a dump or a ScenarioError: no crash, no hang, no unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "formats/flight_recorder/flight_recorder.h"
#include "formats/pickle/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const petrsim::PickleDocument doc = petrsim::ParsePickle(bytes, "fuzz");
    (void)doc;
  } catch (const petrsim::ScenarioError&) {
  }
  try {
    const petrsim::FrDump dump = petrsim::ParseFlightRecorderDump(bytes, "fuzz", 0u);
    (void)dump;
  } catch (const petrsim::ScenarioError&) {
  }
  return 0;
}
