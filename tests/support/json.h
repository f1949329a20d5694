// Tiny RapidJSON helpers for tests: parse, serialize, and edit one member of a JSON object text.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

namespace gw::testing {

// Parses `text`; on malformed input the result has HasParseError() set.
rapidjson::Document parse_json(std::string_view text);

// Compact JSON text of `v`.
std::string to_json(const rapidjson::Value& v);

// `object_json` with member `key` set to the JSON value `value_json` (added or replaced).
// Throws std::invalid_argument when either text is malformed or `object_json` is not an object.
std::string json_with(std::string_view object_json, std::string_view key,
                      std::string_view value_json);

// `object_json` without member `key` (unchanged when absent). Throws like json_with.
std::string json_without(std::string_view object_json, std::string_view key);

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

// Member `key` of `v`; a null value when `v` is not an object or has no such member. Unlike
// operator[], never asserts, so a malformed server response fails a check instead of the run.
const rapidjson::Value& field(const rapidjson::Value& v, std::string_view key);

// Element `i` of array `v`; a null value when `v` is not an array or too short.
const rapidjson::Value& at(const rapidjson::Value& v, size_t i);

// The number of elements of array `v`; -1 when `v` is not an array.
int64_t length(const rapidjson::Value& v);

// The elements of array `v` (none when `v` is not an array), for range-for.
std::vector<const rapidjson::Value*> items(const rapidjson::Value& v);

// Member `key` of object `v` as a string; "" when `v` is not an object or the member is missing or
// not a string.
std::string str(const rapidjson::Value& v, std::string_view key);

// Member `key` of object `v` as an int64; `fallback` when missing or not an integer.
int64_t num(const rapidjson::Value& v, std::string_view key, int64_t fallback = -1);

}  // namespace gw::testing
