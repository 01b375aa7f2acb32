// Option checks shared by the `simulate` commands (cmd_simulate.cpp, cmd_simulate_radio.cpp).
//
// The library's own checks name its parameters ("sample rate"), not what the user typed; these
// run first, in the command's callback, so that a bad value is refused with a message naming the
// option ("simulate psf --cols: expected ..., found ...") before anything is computed or written.
// Defaults are applied only when an option is absent (std::optional, or CLI11's count()), never
// because a value such as 0 was typed: a value that is typed is checked.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "halfscope/core/dtype.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::cli::simulate_checks {

/// `v` as the shortest text that reads back to the same double ("1e+06", "0.1", "nan", "-inf").
inline std::string number_text(double v) {
  char text[32];
  const auto r = std::to_chars(text, text + sizeof text, v);
  return std::string(text, r.ptr);
}

/// InvalidInput "simulate <command> <option>: expected <expected>, found <found>".
[[noreturn]] inline void refuse(std::string_view command, std::string_view option,
                                std::string_view expected, std::string_view found) {
  throw InvalidInput("simulate " + std::string(command) + " " + std::string(option) +
                     ": expected " + std::string(expected) + ", found " + std::string(found));
}

/// A count such as --rows: at least `least`.
inline void check_at_least(std::int64_t v, std::int64_t least, std::string_view command,
                           std::string_view option) {
  if (v < least)
    refuse(command, option, "an integer >= " + std::to_string(least), std::to_string(v));
}

/// A finite number (NaN and +-inf would poison every value computed from it).
inline void check_finite(double v, std::string_view command, std::string_view option) {
  if (!std::isfinite(v)) refuse(command, option, "a finite number", number_text(v));
}

/// A finite number > 0 with its unit, e.g. "arcsec".
inline void check_positive(double v, std::string_view command, std::string_view option,
                           std::string_view unit) {
  if (!(std::isfinite(v) && v > 0))
    refuse(command, option, "a finite " + std::string(unit) + " > 0", number_text(v));
}

/// The floating dtypes a simulated image may be written in.
inline constexpr std::string_view kFloatDtypes = "float64, float32, float16 or bfloat16";

/// --dtype as a floating type (NumPy's names and codes, e.g. float16 or f2). An integer type
/// would round the simulated values (a kernel normalised to sum 1 becomes all zeros), so it is
/// refused like an unknown name.
inline DType parse_float_dtype(const std::string& text, std::string_view command) {
  std::optional<DType> t;
  try {
    t = parse_dtype(text);
  } catch (const InvalidInput&) {
    // Refused below with the option's name and the floating types only.
  }
  if (!t || !dtype_is_float(*t)) refuse(command, "--dtype", kFloatDtypes, "\"" + text + "\"");
  return *t;
}

/// The largest finite value of a floating dtype.
inline double largest_finite(DType t) {
  switch (t) {
    case DType::f16:
      return 65504.0;
    case DType::bf16:
      return 0x1.fep127;  // 0x7f7f: the largest float32 with 8 significand bits
    case DType::f32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

}  // namespace halfscope::cli::simulate_checks
