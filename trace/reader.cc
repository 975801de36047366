// Reading trace files; see reader.h.
#include "trace/reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <system_error>
#include <vector>

#include "base/error.h"
#include "base/file_io.h"

namespace petrsim {
namespace {

// No message of a petrsim trace comes near this; a larger length prefix means corruption.
constexpr uint64_t kMessageBytesMax = uint64_t{256} << 20;

// The framing both readers share: the file in chunks of 1 MiB, a header checked for its version,
// then length-delimited events, each handed to `decode(body, size)` (false: it does not parse)
// and then, outside the error handling, to `deliver()`. A cut or corrupt event after a good
// header ends the reading with *partial_error set (or throws without it).
template <class Decode, class Deliver>
TraceHeader ReadFramed(const std::string& path, Decode&& decode, Deliver&& deliver, std::string* partial_error) {
  // O_NONBLOCK: a FIFO named like a trace must not hang the reader at open (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ScenarioError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw ScenarioError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) {
    throw ScenarioError(
        fmt::format("{}: expected a petrsim trace file (a regular file), found {}", path, FileKindName(info.st_mode)));
  }
  const uint64_t file_bytes = static_cast<uint64_t>(info.st_size);
  // Read in chunks of 1 MiB (plus the tail of a message cut by the chunk's end).
  std::vector<uint8_t> buffer;
  size_t begin = 0;       // the next message in buffer
  uint64_t consumed = 0;  // file bytes before buffer[0]
  bool eof = false;
  const auto fill = [&](size_t need) {  // makes at least `need` bytes available from begin
    while (!eof && buffer.size() - begin < need) {
      if (begin > 0) {
        buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(begin));
        consumed += begin;
        begin = 0;
      }
      const size_t at = buffer.size();
      const size_t chunk = std::max<size_t>(need, size_t{1} << 20);
      buffer.resize(at + chunk);
      ssize_t n;
      do {
        n = ::read(fd, buffer.data() + at, chunk);
      } while (n < 0 && errno == EINTR);
      if (n < 0)
        throw ScenarioError(fmt::format("{}: read error at byte {}: {}", path, consumed + at, std::strerror(errno)));
      buffer.resize(at + static_cast<size_t>(n));
      if (n == 0) eof = true;
    }
  };
  TraceHeader header;
  uint64_t index = 0;
  for (;; ++index) {
    try {
      fill(10);
      const uint64_t offset = consumed + begin;
      const auto where = [&] {
        return fmt::format("{}: message {} ({}) at byte {}", path, index,
                           index == 0 ? "the TraceHeader" : "a TraceEvent", offset);
      };
      if (begin == buffer.size()) break;  // the end, between messages
      const uint8_t* p = buffer.data() + begin;
      const uint8_t* const available_end = buffer.data() + buffer.size();
      uint64_t size = 0;
      if (!ReadVarint(p, available_end, size)) {
        throw ScenarioError(
            fmt::format("{}: truncated or corrupt length prefix (file has {} bytes)", where(), file_bytes));
      }
      const size_t prefix = static_cast<size_t>(p - (buffer.data() + begin));
      if (size > kMessageBytesMax) {
        throw ScenarioError(
            fmt::format("{}: corrupt: length prefix says {} bytes (at most {})", where(), size, kMessageBytesMax));
      }
      if (size > file_bytes - std::min(file_bytes, offset + prefix)) {
        throw ScenarioError(
            fmt::format("{}: truncated: the message needs {} bytes, only {} remain (the writer did not finish?)",
                        where(), size, file_bytes - std::min(file_bytes, offset + prefix)));
      }
      fill(prefix + size);
      if (buffer.size() - begin < prefix + size) {
        throw ScenarioError(
            fmt::format("{}: truncated: the message needs {} bytes, only {} remain (the writer did not finish?)",
                        where(), size, buffer.size() - begin - prefix));
      }
      const uint8_t* body = buffer.data() + begin + prefix;
      if (index == 0) {
        if (!header.ParseFromArray(body, static_cast<int>(size))) {
          throw ScenarioError(fmt::format("{}: corrupt: its {} bytes do not parse", where(), size));
        }
        const uint32_t version = header.format_version();
        if (version == 0) {
          throw ScenarioError(fmt::format("{}: not a petrsim trace: its first message has no format_version", path));
        }
        if (version > kTraceFormatVersion) {
          throw ScenarioError(
              fmt::format("{}: format_version {} is newer than this build reads ({}); use a newer "
                          "petrsim",
                          path, version, kTraceFormatVersion));
        }
      } else {
        if (!decode(body, static_cast<size_t>(size))) {
          throw ScenarioError(fmt::format("{}: corrupt: its {} bytes do not parse", where(), size));
        }
      }
      begin += prefix + size;
    } catch (const ScenarioError& error) {
      if (partial_error == nullptr || index == 0) throw;
      *partial_error = error.what();
      break;
    }
    // Outside the try: an error of the caller's own is not a cut file.
    if (index > 0) deliver();
  }
  if (index == 0) throw ScenarioError(fmt::format("{}: empty: expected a TraceHeader first", path));
  return header;
}

}  // namespace

TraceHeader ForEachTraceEvent(const std::string& path, const std::function<void(const TraceEvent&)>& on_event,
                              std::string* partial_error) {
  TraceEvent event;
  return ReadFramed(
      path, [&](const uint8_t* body, size_t size) { return event.ParseFromArray(body, static_cast<int>(size)); },
      [&] { on_event(event); }, partial_error);
}

TraceHeader ScanTraceEvents(const std::string& path, const std::function<void(const TraceEventView&)>& on_event,
                            std::string* partial_error) {
  TraceEventView view;
  return ReadFramed(
      path, [&](const uint8_t* body, size_t size) { return DecodeTraceEvent(body, body + size, view); },
      [&] { on_event(view); }, partial_error);
}

RankTrace ReadRankTrace(const std::string& path) { return ReadRankTrace(path, nullptr); }

RankTrace ReadRankTrace(const std::string& path, std::string* partial_error) {
  RankTrace trace;
  trace.header = ForEachTraceEvent(
      path, [&](const TraceEvent& event) { trace.events.push_back(event); }, partial_error);
  return trace;
}

}  // namespace petrsim
