// chief: reading report.json and the task summaries, whose keys may be missing or of the wrong
// type (an older summary, a vanished task's partial one, a hand-edited file): every reader
// here gives a fallback instead of throwing. Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace fulcrum::chief {

// j[key] when j is an object holding it, else null (never inserts).
inline const nlohmann::json& At(const nlohmann::json& j, std::string_view key) {
  static const nlohmann::json* const kNull = new nlohmann::json();
  if (!j.is_object()) return *kNull;
  auto it = j.find(key);
  return it != j.end() ? *it : *kNull;
}

// j[key] when it is a number, else `fallback`.
inline double Num(const nlohmann::json& j, std::string_view key, double fallback = 0.0) {
  const nlohmann::json& v = At(j, key);
  return v.is_number() ? v.get<double>() : fallback;
}

// j[key] when it is a string, else `fallback`.
inline std::string Str(const nlohmann::json& j, std::string_view key,
                       const std::string& fallback = "") {
  const nlohmann::json& v = At(j, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

// j[key] when it is an array, else an empty one.
inline const nlohmann::json& Array(const nlohmann::json& j, std::string_view key) {
  static const nlohmann::json* const kEmpty = new nlohmann::json(nlohmann::json::array());
  const nlohmann::json& v = At(j, key);
  return v.is_array() ? v : *kEmpty;
}

}  // namespace fulcrum::chief
