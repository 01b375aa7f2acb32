#include "halfscope/core/precision.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope {

namespace {
constexpr std::array<Precision, 7> kAll{Precision::Double, Precision::Single, Precision::TF32,
                                        Precision::Half,   Precision::Mixed,  Precision::BF16,
                                        Precision::Split};
}

std::string_view precision_name(Precision p) noexcept {
  switch (p) {
    case Precision::Double:
      return "double";
    case Precision::Single:
      return "single";
    case Precision::TF32:
      return "tf32";
    case Precision::Half:
      return "half";
    case Precision::Mixed:
      return "mixed";
    case Precision::BF16:
      return "bf16";
    case Precision::Split:
      return "split";
  }
  return "unknown";
}

Precision parse_precision(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  for (Precision p : kAll)
    if (t == precision_name(p)) return p;
  if (t == "fp64" || t == "float64") return Precision::Double;
  if (t == "fp32" || t == "float32" || t == "float") return Precision::Single;
  if (t == "fp16" || t == "float16") return Precision::Half;
  if (t == "bfloat16") return Precision::BF16;
  throw InvalidInput("unknown precision '" + std::string(text) + "': expected one of " +
                     precision_list(kAll));
}

std::span<const Precision> all_precisions() noexcept {
  return kAll;
}

double storage_unit_roundoff(Precision p) noexcept {
  switch (p) {
    case Precision::Double:
      return 0x1p-53;
    case Precision::Single:
    case Precision::TF32:
    case Precision::Split:
      return 0x1p-24;
    case Precision::Half:
    case Precision::Mixed:
      return 0x1p-11;
    case Precision::BF16:
      return 0x1p-8;
  }
  return 1.0;
}

double compute_unit_roundoff(Precision p) noexcept {
  switch (p) {
    case Precision::Double:
      return 0x1p-53;
    case Precision::Single:
    case Precision::Mixed:
    case Precision::BF16:
    case Precision::Split:
      return 0x1p-24;
    case Precision::TF32:
      return 0x1p-11;  // TF32 keeps 10 explicit mantissa bits in products
    case Precision::Half:
      return 0x1p-11;
  }
  return 1.0;
}

std::string precision_list(std::span<const Precision> ps) {
  std::string s;
  for (Precision p : ps) s += (s.empty() ? "" : ", ") + std::string(precision_name(p));
  return s;
}

}  // namespace halfscope
