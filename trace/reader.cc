// Reading trace files; see reader.h.
#include "trace/reader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <system_error>
#include <vector>

#include "base/assert.h"
#include "base/error.h"
#include "base/file_io.h"

namespace petrsim {
namespace {

// No message of a petrsim trace comes near this; a larger length prefix means corruption.
constexpr uint64_t kMessageBytesMax = uint64_t{256} << 20;

// A trace file opened for reading, read in chunks of 1 MiB (plus the tail of a message cut by the
// chunk's end). O_NONBLOCK: a FIFO named like a trace must not hang the reader at open; anything
// but a regular file is refused.
class ChunkedFile {
 public:
  explicit ChunkedFile(const std::string& path) : path_(path) {
    fd_.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_.fd < 0) throw ScenarioError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat info {};
    if (::fstat(fd_.fd, &info) != 0) {
      throw ScenarioError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
    }
    if (!S_ISREG(info.st_mode)) {
      throw ScenarioError(fmt::format("{}: expected a petrsim trace file (a regular file), found {}", path,
                                      FileKindName(info.st_mode)));
    }
    file_bytes_ = static_cast<uint64_t>(info.st_size);
  }

  // One length-delimited message: its body, size and where it starts in the file.
  struct Message {
    const uint8_t* body = nullptr;
    uint64_t size = 0;
    size_t prefix = 0;    // the length prefix's bytes
    uint64_t offset = 0;  // of the prefix in the file
  };

  // The next message, message `index` of the file; nothing at the end, between messages. Throws
  // on a cut or corrupt one. Consume() moves past it.
  std::optional<Message> Next(uint64_t index) {
    Fill(10);
    Message m;
    m.offset = consumed_ + begin_;
    const auto where = [&] { return Where(index, m.offset); };
    if (begin_ == buffer_.size()) return std::nullopt;
    const uint8_t* p = buffer_.data() + begin_;
    if (!ReadVarint(p, buffer_.data() + buffer_.size(), m.size)) {
      throw ScenarioError(
          fmt::format("{}: truncated or corrupt length prefix (file has {} bytes)", where(), file_bytes_));
    }
    m.prefix = static_cast<size_t>(p - (buffer_.data() + begin_));
    if (m.size > kMessageBytesMax) {
      throw ScenarioError(
          fmt::format("{}: corrupt: length prefix says {} bytes (at most {})", where(), m.size, kMessageBytesMax));
    }
    const uint64_t remaining = file_bytes_ - std::min(file_bytes_, m.offset + m.prefix);
    if (m.size > remaining) {
      throw ScenarioError(
          fmt::format("{}: truncated: the message needs {} bytes, only {} remain (the writer did not finish?)", where(),
                      m.size, remaining));
    }
    Fill(m.prefix + m.size);
    if (buffer_.size() - begin_ < m.prefix + m.size) {
      throw ScenarioError(
          fmt::format("{}: truncated: the message needs {} bytes, only {} remain (the writer did not finish?)", where(),
                      m.size, buffer_.size() - begin_ - m.prefix));
    }
    // The checks above leave a whole message in the buffer, after a prefix ReadVarint accepted.
    PETRSIM_ASSERT(m.prefix >= 1);
    PETRSIM_ASSERT(m.prefix <= 10);
    PETRSIM_ASSERT(buffer_.size() - begin_ >= m.prefix + m.size);
    m.body = buffer_.data() + begin_ + m.prefix;
    return m;
  }

  void Consume(const Message& m) { begin_ += m.prefix + m.size; }

  // "<path>: message N (...) at byte B" for message `index` at `offset`.
  std::string Where(uint64_t index, uint64_t offset) const {
    return fmt::format("{}: message {} ({}) at byte {}", path_, index, index == 0 ? "the TraceHeader" : "a TraceEvent",
                       offset);
  }

 private:
  // Makes at least `need` bytes available from begin_, or all the file has.
  void Fill(size_t need) {
    while (!eof_ && buffer_.size() - begin_ < need) {
      if (begin_ > 0) {
        buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(begin_));
        consumed_ += begin_;
        begin_ = 0;
      }
      const size_t at = buffer_.size();
      const size_t chunk = std::max<size_t>(need, size_t{1} << 20);
      buffer_.resize(at + chunk);
      ssize_t n;
      do {
        n = ::read(fd_.fd, buffer_.data() + at, chunk);
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        throw ScenarioError(fmt::format("{}: read error at byte {}: {}", path_, consumed_ + at, std::strerror(errno)));
      }
      buffer_.resize(at + static_cast<size_t>(n));
      if (n == 0) eof_ = true;
    }
  }

  // Closes the file however the reading ends (also when the constructor throws after the open).
  struct Fd {
    int fd = -1;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  };

  const std::string& path_;
  Fd fd_;
  uint64_t file_bytes_ = 0;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;       // the next message in buffer_
  uint64_t consumed_ = 0;  // file bytes before buffer_[0]
  bool eof_ = false;
};

// The TraceHeader, message 0: it must parse and name a format version this build reads.
void ParseHeader(const std::string& path, const std::string& where, const ChunkedFile::Message& m,
                 TraceHeader& header) {
  if (!header.ParseFromArray(m.body, static_cast<int>(m.size))) {
    throw ScenarioError(fmt::format("{}: corrupt: its {} bytes do not parse", where, m.size));
  }
  // A field this build knows, found with another wire type, lands among the unknown fields: protobuf never changes
  // a field's type between versions, so the message is not a header at all (a trace whose header was cut off begins
  // with an event, whose kind reads as format_version).
  const google::protobuf::UnknownFieldSet& unknown = header.GetReflection()->GetUnknownFields(header);
  for (int i = 0; i < unknown.field_count(); ++i) {
    if (TraceHeader::descriptor()->FindFieldByNumber(unknown.field(i).number()) != nullptr) {
      throw ScenarioError(fmt::format(
          "{}: not a petrsim trace: expected its header first (a TraceHeader), found a message whose field {} has "
          "another type (an event: the header is missing, or the file is a piece of a trace)",
          path, unknown.field(i).number()));
    }
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
}

// The framing both readers share: a header checked for its version, then length-delimited
// events, each handed to `decode(body, size)` (false: it does not parse) and then, outside the
// error handling, to `deliver()`. A cut or corrupt event after a good header ends the reading
// with *partial_error set (or throws without it).
template <class Decode, class Deliver>
TraceHeader ReadFramed(const std::string& path, Decode&& decode, Deliver&& deliver, std::string* partial_error) {
  ChunkedFile file(path);
  TraceHeader header;
  uint64_t index = 0;
  for (;; ++index) {
    try {
      const std::optional<ChunkedFile::Message> m = file.Next(index);
      if (!m) break;  // the end, between messages
      if (index == 0) {
        ParseHeader(path, file.Where(index, m->offset), *m, header);
      } else if (!decode(m->body, static_cast<size_t>(m->size))) {
        throw ScenarioError(
            fmt::format("{}: corrupt: its {} bytes do not parse", file.Where(index, m->offset), m->size));
      }
      file.Consume(*m);
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
      [&] {
        // proto2 enums are closed: the parser keeps a value its enum does not name aside.
        PETRSIM_ASSERT(TraceEventKind_IsValid(event.kind()));
        on_event(event);
      },
      partial_error);
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
