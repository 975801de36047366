// A TraceSink that hands every record to each of several sinks, in the order they were added
// (`petrsim --perfetto` and `--trace` together). The sinks are not owned.
#pragma once

#include <vector>

#include "trace/trace_sink.h"

namespace petrsim {

class FanOutSink : public TraceSink {
 public:
  void Add(TraceSink* sink) { sinks_.push_back(sink); }
  bool empty() const { return sinks_.empty(); }
  void Record(const TraceRecord& record) override {
    for (TraceSink* sink : sinks_) sink->Record(record);
  }

 private:
  std::vector<TraceSink*> sinks_;
};

}  // namespace petrsim
