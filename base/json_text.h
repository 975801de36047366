// The one way petrsim turns a JSON document into text (every --json, sweep shard, merge and
// report): nlohmann's dump with invalid UTF-8 replaced by U+FFFD instead of thrown. Strings from
// input are validated where they enter (base/utf8.h); this is the last line of defence, so that a
// name that slipped through (a path is bytes) never aborts a report. Header-only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace petrsim {

// `indent` as nlohmann's: -1 for one line, N for N spaces per level. Any nlohmann document type
// (json, ordered_json: converting one to the other would reorder its keys).
template <typename Document>
std::string JsonText(const Document& document, int indent = -1) {
  return document.dump(indent, ' ', false, Document::error_handler_t::replace);
}

}  // namespace petrsim
