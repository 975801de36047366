// `--set field.path=value` overrides; see scenario_override.h. Everything goes through protobuf
// reflection so that a field added to scenario.proto is settable (and listed in errors) as is.
#include "scenario/scenario_override.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cctype>
#include <cerrno>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <system_error>

#include "base/error.h"
#include "base/utf8.h"

namespace petrsim {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One path segment: a field name and, for `name[i]`, the element index.
struct Segment {
  std::string name;
  std::optional<int> index;
};

// Where a scalar goes: the singular field, element `index` of a repeated one, or a new element.
struct Slot {
  enum Kind { kSingular, kAt, kAppend };
  Kind kind = kSingular;
  int index = 0;
};

// A parsed value, or nothing; `note` says why beyond "expects <type>" (e.g. "out of range").
template <typename T>
struct Parsed {
  std::optional<T> value;
  std::string note;
};

// Throws the override error; every message starts with the override as the user typed it.
[[noreturn]] void Fail(std::string_view override_text, const std::string& what) {
  throw ScenarioError("--set " + std::string(override_text) + ": " + what);
}

std::string FieldNames(const Descriptor& descriptor) {
  std::string names;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    if (i > 0) names += ", ";
    names += descriptor.field(i)->name();
  }
  return names;
}

std::string EnumNames(const EnumDescriptor& descriptor) {
  std::string names;
  for (int i = 0; i < descriptor.value_count(); ++i) {
    if (i > 0) names += ", ";
    names += descriptor.value(i)->name();
  }
  return names;
}

// What a field holds, as a noun phrase: "job.world_size is <this>".
std::string KindName(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return "a signed 32-bit integer";
    case FieldDescriptor::CPPTYPE_INT64:
      return "a signed 64-bit integer";
    case FieldDescriptor::CPPTYPE_UINT32:
      return "an unsigned 32-bit integer";
    case FieldDescriptor::CPPTYPE_UINT64:
      return "an unsigned 64-bit integer";
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return "a finite number";
    case FieldDescriptor::CPPTYPE_FLOAT:
      return "a finite 32-bit number";
    case FieldDescriptor::CPPTYPE_BOOL:
      return "a bool";
    case FieldDescriptor::CPPTYPE_ENUM:
      return "an enum (" + field.enum_type()->full_name() + ")";
    case FieldDescriptor::CPPTYPE_STRING:
      return "a string";
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return "a message (" + field.message_type()->full_name() + ")";
  }
  return "a value";
}

// What a value for the field must look like: "job.world_size expects <this>, got 'abc'".
std::string Expectation(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return "true, false, 1 or 0";
    case FieldDescriptor::CPPTYPE_ENUM:
      return "one of " + EnumNames(*field.enum_type()) + " or its number";
    default:
      return KindName(field);
  }
}

// An element index: decimal digits only (from_chars alone would accept a leading '-').
std::optional<int> ParseIndex(std::string_view digits) {
  int index = 0;
  const char* const last = digits.data() + digits.size();
  const auto [end, error] = std::from_chars(digits.data(), last, index);
  if (digits.empty() || digits.front() == '-' || error != std::errc() || end != last) {
    return std::nullopt;
  }
  return index;
}

// Parses "name" or "name[i]".
Segment ParseSegment(std::string_view override_text, std::string_view path, std::string_view text) {
  if (text.empty()) {
    Fail(override_text, "empty field name in '" + std::string(path) + "'");
  }
  const size_t open = text.find('[');
  if (open == std::string_view::npos) return Segment{std::string(text), std::nullopt};
  std::optional<int> index;
  // Short-circuit order matters: the digits lie between '[' and a final ']'.
  if (open == 0 || text.back() != ']' || !(index = ParseIndex(text.substr(open + 1, text.size() - open - 2)))) {
    Fail(override_text,
         "bad path segment '" + std::string(text) + "'; expected a field name, optionally with an index: name[0]");
  }
  return Segment{std::string(text.substr(0, open)), index};
}

// Strict decimal integer of type T: an optional '-' (signed types only) and digits, nothing else.
template <typename T>
Parsed<T> ParseInteger(std::string_view text) {
  T value{};
  const char* const last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  if (end != last || text.empty()) return {};
  if (error == std::errc::result_out_of_range) return {std::nullopt, " (out of range)"};
  if (error != std::errc()) return {};
  return {value, ""};
}

// A finite double, the whole text consumed (strtod, as the C locale reads it).
Parsed<double> ParseDouble(std::string_view text) {
  // strtod skips leading white space; a value with spaces is a typo, not a number.
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return {};
  const std::string terminated(text);  // strtod needs a NUL; an embedded NUL fails the end check
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(terminated.c_str(), &end);
  if (end != terminated.c_str() + terminated.size()) return {};
  if (std::isnan(value)) return {std::nullopt, " (not a number)"};
  if (std::isinf(value)) return {std::nullopt, errno == ERANGE ? " (out of range)" : " (infinite)"};
  return {value, ""};
}

Parsed<float> ParseFloat(std::string_view text) {
  const Parsed<double> parsed = ParseDouble(text);
  if (!parsed.value) return {std::nullopt, parsed.note};
  if (std::fabs(*parsed.value) > FLT_MAX) return {std::nullopt, " (out of range)"};
  return {static_cast<float>(*parsed.value), ""};
}

Parsed<bool> ParseBool(std::string_view text) {
  if (text == "true" || text == "1") return {true, ""};
  if (text == "false" || text == "0") return {false, ""};
  return {};
}

// An enum value by its name in scenario.proto or by a number the enum defines (proto2 enums are
// closed: an undefined number would silently land in the unknown fields).
Parsed<int> ParseEnum(const EnumDescriptor& descriptor, std::string_view text) {
  if (const EnumValueDescriptor* value = descriptor.FindValueByName(std::string(text))) {
    return {value->number(), ""};
  }
  const Parsed<int> number = ParseInteger<int>(text);
  if (number.value && descriptor.FindValueByNumber(*number.value) != nullptr) return number;
  return {};
}

// The three Reflection setters of one value type: singular, repeated element, repeated append.
template <typename T>
struct Setters {
  void (Reflection::*set)(Message*, const FieldDescriptor*, T) const;
  void (Reflection::*set_at)(Message*, const FieldDescriptor*, int, T) const;
  void (Reflection::*add)(Message*, const FieldDescriptor*, T) const;
};

// Context of one scalar assignment, for the error message.
struct Target {
  std::string_view override_text;
  std::string path;  // e.g. "job.world_size" or "filters.classes[2]"
  Message* message;
  const FieldDescriptor* field;
};

template <typename T>
void Store(const Target& target, const Slot& slot, std::string_view text, const Parsed<T>& parsed,
           const Setters<T>& setters) {
  if (!parsed.value) {
    Fail(target.override_text,
         target.path + " expects " + Expectation(*target.field) + ", got '" + std::string(text) + "'" + parsed.note);
  }
  const Reflection& reflection = *target.message->GetReflection();
  switch (slot.kind) {
    case Slot::kSingular:
      (reflection.*setters.set)(target.message, target.field, *parsed.value);
      break;
    case Slot::kAt:
      (reflection.*setters.set_at)(target.message, target.field, slot.index, *parsed.value);
      break;
    case Slot::kAppend:
      (reflection.*setters.add)(target.message, target.field, *parsed.value);
      break;
  }
}

// Parses `text` as the field's type and stores it in `slot`. Setting a scalar oneof member
// selects its case, as the generated setters do.
void SetScalar(const Target& target, const Slot& slot, std::string_view text) {
  const FieldDescriptor& field = *target.field;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return Store<int32_t>(target, slot, text, ParseInteger<int32_t>(text),
                            {&Reflection::SetInt32, &Reflection::SetRepeatedInt32, &Reflection::AddInt32});
    case FieldDescriptor::CPPTYPE_INT64:
      return Store<int64_t>(target, slot, text, ParseInteger<int64_t>(text),
                            {&Reflection::SetInt64, &Reflection::SetRepeatedInt64, &Reflection::AddInt64});
    case FieldDescriptor::CPPTYPE_UINT32:
      return Store<uint32_t>(target, slot, text, ParseInteger<uint32_t>(text),
                             {&Reflection::SetUInt32, &Reflection::SetRepeatedUInt32, &Reflection::AddUInt32});
    case FieldDescriptor::CPPTYPE_UINT64:
      return Store<uint64_t>(target, slot, text, ParseInteger<uint64_t>(text),
                             {&Reflection::SetUInt64, &Reflection::SetRepeatedUInt64, &Reflection::AddUInt64});
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Store<double>(target, slot, text, ParseDouble(text),
                           {&Reflection::SetDouble, &Reflection::SetRepeatedDouble, &Reflection::AddDouble});
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Store<float>(target, slot, text, ParseFloat(text),
                          {&Reflection::SetFloat, &Reflection::SetRepeatedFloat, &Reflection::AddFloat});
    case FieldDescriptor::CPPTYPE_BOOL:
      return Store<bool>(target, slot, text, ParseBool(text),
                         {&Reflection::SetBool, &Reflection::SetRepeatedBool, &Reflection::AddBool});
    case FieldDescriptor::CPPTYPE_ENUM:
      return Store<int>(target, slot, text, ParseEnum(*field.enum_type(), text),
                        {&Reflection::SetEnumValue, &Reflection::SetRepeatedEnumValue, &Reflection::AddEnumValue});
    case FieldDescriptor::CPPTYPE_STRING:
      return Store<std::string>(target, slot, text, Parsed<std::string>{std::string(text), ""},
                                {&Reflection::SetString, &Reflection::SetRepeatedString, &Reflection::AddString});
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;  // the caller handles messages
  }
  Fail(target.override_text, target.path + " is " + KindName(field) + "; cannot set it");
}

// Where element `index` of a repeated field of size `size` goes: an existing element, or a new
// one when index == size (so lists can be grown one override at a time).
Slot ElementSlot(std::string_view override_text, const std::string& list_path, int index, int size) {
  if (index < size) return Slot{Slot::kAt, index};
  if (index == size) return Slot{Slot::kAppend, index};
  Fail(override_text, list_path + " has " + std::to_string(size) + " element" + (size == 1 ? "" : "s") + "; index " +
                          std::to_string(index) + " is out of range (index " + std::to_string(size) + " appends one)");
}

// The leaf of an override's path: a scalar field, one element of a list (index given), or the
// whole list (comma separated; an empty value leaves it empty).
void SetLeaf(std::string_view override_text, Message* message, const FieldDescriptor* field, const Segment& segment,
             const std::string& field_path, const std::string& element_path, std::string_view value) {
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    Fail(override_text, element_path + " is a message (" + field->message_type()->full_name() +
                            "); set one of its fields: " + FieldNames(*field->message_type()));
  }
  const Reflection& reflection = *message->GetReflection();
  Target target{override_text, element_path, message, field};
  if (!field->is_repeated()) {
    SetScalar(target, Slot{}, value);
  } else if (segment.index) {
    SetScalar(target, ElementSlot(override_text, field_path, *segment.index, reflection.FieldSize(*message, field)),
              value);
  } else {
    reflection.ClearField(message, field);
    size_t item_start = 0;
    for (int i = 0; !value.empty() && item_start <= value.size(); ++i) {
      const size_t comma = value.find(',', item_start);
      const size_t item_end = comma == std::string_view::npos ? value.size() : comma;
      target.path = field_path + "[" + std::to_string(i) + "]";
      SetScalar(target, Slot{Slot::kAppend, i}, value.substr(item_start, item_end - item_start));
      item_start = item_end + 1;
    }
  }
}

// The message a path goes on into through `field` (an element of a list, created when the index
// appends one); `rest` is the path after it, for the error when `field` is no message.
Message* Descend(std::string_view override_text, Message* message, const FieldDescriptor* field, const Segment& segment,
                 const std::string& field_path, std::string_view rest) {
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
    Fail(override_text, field_path + " is " + KindName(*field) + ", not a message, so it has no field '" +
                            std::string(rest.substr(0, rest.find('.'))) + "'");
  }
  const Reflection& reflection = *message->GetReflection();
  if (field->is_repeated()) {
    const Slot slot = ElementSlot(override_text, field_path, *segment.index, reflection.FieldSize(*message, field));
    return slot.kind == Slot::kAppend ? reflection.AddMessage(message, field)
                                      : reflection.MutableRepeatedMessage(message, field, slot.index);
  }
  // For a oneof member this selects the case and clears the other member.
  return reflection.MutableMessage(message, field);
}

void ApplyInPlace(Message& root, std::string_view override_text) {
  // A command line is bytes; a scenario's names and paths are text, and every writer after this
  // (JSON, protobuf) needs them to be.
  if (const std::optional<size_t> bad = FirstInvalidUtf8(override_text)) {
    throw ScenarioError("--set " + EscapedBytes(override_text) +
                        ": not text: " + InvalidUtf8Detail(override_text, *bad) + "; expected UTF-8");
  }
  const size_t equals = override_text.find('=');
  if (equals == std::string_view::npos) {
    Fail(override_text, "expected field.path=value, found no '='");
  }
  const std::string_view path = override_text.substr(0, equals);
  const std::string_view value = override_text.substr(equals + 1);
  if (path.empty()) Fail(override_text, "empty field path; expected field.path=value");

  Message* message = &root;
  std::string walked;  // the path resolved so far, indices included
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const bool leaf = dot == std::string_view::npos;
    const std::string_view segment_text = path.substr(start, leaf ? std::string_view::npos : dot - start);
    const Segment segment = ParseSegment(override_text, path, segment_text);

    const Descriptor& descriptor = *message->GetDescriptor();
    const FieldDescriptor* field = descriptor.FindFieldByName(segment.name);
    if (field == nullptr) {
      Fail(override_text,
           "no field '" + segment.name + "' in " + descriptor.full_name() + "; fields: " + FieldNames(descriptor));
    }
    const std::string field_path = walked.empty() ? segment.name : walked + "." + segment.name;
    const std::string element_path =
        walked.empty() ? std::string(segment_text) : walked + "." + std::string(segment_text);
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;

    if (segment.index && !field->is_repeated()) {
      Fail(override_text, field_path + " is not a list; drop the index [" + std::to_string(*segment.index) + "]");
    }
    if (is_message && field->is_repeated() && !segment.index) {
      Fail(override_text, field_path + " is a list of " + field->message_type()->full_name() +
                              "; set a field of one element, " + field_path +
                              "[i].<field>, with <field> one of: " + FieldNames(*field->message_type()));
    }
    if (leaf) {
      SetLeaf(override_text, message, field, segment, field_path, element_path, value);
      return;
    }
    message = Descend(override_text, message, field, segment, field_path, path.substr(dot + 1));
    walked = element_path;
    start = dot + 1;
  }
}

}  // namespace

void ApplyOverride(Scenario& scenario, std::string_view override_text) {
  // Work on a copy: navigation creates elements and switches oneof cases before the value is
  // parsed, and a rejected override must not leave half of itself behind.
  Scenario candidate = scenario;
  ApplyInPlace(candidate, override_text);
  scenario.Swap(&candidate);
}

void ApplyOverrides(Scenario& scenario, const std::vector<std::string>& overrides) {
  Scenario candidate = scenario;
  for (const std::string& override_text : overrides) ApplyInPlace(candidate, override_text);
  scenario.Swap(&candidate);
}

}  // namespace petrsim
