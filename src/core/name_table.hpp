// Internal: enum <-> name tables for the parsers of every operation (conv modes, mfilter methods
// ...), so each names its values once and every "unknown name" error lists the valid ones.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "halfscope/core/error.hpp"

namespace halfscope::detail {

template <class E, std::size_t N>
using NameTable = std::array<std::pair<std::string_view, E>, N>;

/// The value named `text`; InvalidInput "unknown <what> '<text>': expected one of a, b, c".
template <class E, std::size_t N>
E parse_name(std::string_view text, const NameTable<E, N>& names, const char* what) {
  for (const auto& [name, value] : names)
    if (text == name) return value;
  std::string valid;
  for (const auto& [name, value] : names) valid += std::string(valid.empty() ? "" : ", ") += name;
  throw InvalidInput("unknown " + std::string(what) + " '" + std::string(text) +
                     "': expected one of " + valid);
}

/// The name of `e`, or "unknown" for a value outside the table.
template <class E, std::size_t N>
std::string_view name_of(E e, const NameTable<E, N>& names) {
  for (const auto& [name, value] : names)
    if (e == value) return name;
  return "unknown";
}

}  // namespace halfscope::detail
