// A small JSON reader and writer for the headers lockstep reads and writes
// (safetensors): objects, arrays, strings, numbers, true/false/null. Reading
// reports the byte where it stopped and what it expected, so a corrupt
// header is an Error that says where, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"

namespace lockstep::io {

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;                            // kArray
  std::vector<std::pair<std::string, Json>> members;  // kObject, in file order

  // The member named `key`, or null when there is none (or this is no object).
  const Json* find(const std::string& key) const {
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

namespace detail {
class JsonReader {
 public:
  JsonReader(const std::string& text, std::string what) : s_(text), what_(std::move(what)) {}

  Json document() {
    Json j = value(0);
    skip_space();
    if (at_ != s_.size()) error("the end of the JSON text");
    return j;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void error(const char* expected) const {
    fail(what_, ": malformed JSON at byte ", at_, " of ", s_.size(), ", expected ", expected);
  }
  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* expected) {
    if (!take(c)) error(expected);
  }
  Json value(int depth) {
    if (depth > kMaxDepth) error("at most 64 levels of nesting");
    skip_space();
    if (at_ >= s_.size()) error("a value");
    Json j;
    const char c = s_[at_];
    if (c == '{') {
      ++at_;
      j.type = Json::Type::kObject;
      if (take('}')) return j;
      do {
        skip_space();
        std::string key = string_value();
        expect(':', "':' after an object key");
        j.members.emplace_back(std::move(key), value(depth + 1));
      } while (take(','));
      expect('}', "',' or '}' in an object");
    } else if (c == '[') {
      ++at_;
      j.type = Json::Type::kArray;
      if (take(']')) return j;
      do j.items.push_back(value(depth + 1));
      while (take(','));
      expect(']', "',' or ']' in an array");
    } else if (c == '"') {
      j.type = Json::Type::kString;
      j.text = string_value();
    } else if (s_.compare(at_, 4, "true") == 0 || s_.compare(at_, 5, "false") == 0) {
      j.type = Json::Type::kBool;
      j.boolean = s_[at_] == 't';
      at_ += j.boolean ? 4 : 5;
    } else if (s_.compare(at_, 4, "null") == 0) {
      at_ += 4;
    } else {
      j.type = Json::Type::kNumber;
      const char* begin = s_.c_str() + at_;
      char* end = nullptr;
      j.number = std::strtod(begin, &end);
      if (end == begin) error("a value");
      at_ += static_cast<std::size_t>(end - begin);
    }
    return j;
  }
  std::string string_value() {
    if (at_ >= s_.size() || s_[at_] != '"') error("a string");
    ++at_;
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c == '\\') {
        if (at_ >= s_.size()) error("an escaped character");
        c = s_[at_++];
        if (c == 'n') c = '\n';
        else if (c == 't') c = '\t';
        else if (c == 'u') error("no \\u escapes (tensor names are ASCII)");
      }
      out.push_back(c);
    }
    if (at_ >= s_.size()) error("the closing '\"' of a string");
    ++at_;
    return out;
  }

  const std::string& s_;
  std::string what_;
  std::size_t at_ = 0;
};
}  // namespace detail

// Parses `text`; errors name `what` (a file) and the byte where reading stopped.
inline Json parse_json(const std::string& text, const std::string& what) {
  return detail::JsonReader(text, what).document();
}

// A JSON string literal for `s` (names and metadata values: ASCII).
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

}  // namespace lockstep::io
