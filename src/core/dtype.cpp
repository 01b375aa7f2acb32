#include "halfscope/core/dtype.hpp"

#include <array>
#include <string>

#include "halfscope/core/error.hpp"

namespace halfscope {

namespace {
struct NamedDType {
  DType dtype;
  std::string_view name;
  std::string_view short_name;  // NumPy's type code without byte order
};
constexpr std::array<NamedDType, 12> kDTypes{{{DType::f16, "float16", "f2"},
                                              {DType::bf16, "bfloat16", "bf16"},
                                              {DType::f32, "float32", "f4"},
                                              {DType::f64, "float64", "f8"},
                                              {DType::i8, "int8", "i1"},
                                              {DType::i16, "int16", "i2"},
                                              {DType::i32, "int32", "i4"},
                                              {DType::i64, "int64", "i8"},
                                              {DType::u8, "uint8", "u1"},
                                              {DType::u16, "uint16", "u2"},
                                              {DType::u32, "uint32", "u4"},
                                              {DType::u64, "uint64", "u8"}}};
}  // namespace

std::string_view dtype_name(DType t) noexcept {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (name == d.name || name == d.short_name) return d.dtype;
  if (name == "half") return DType::f16;
  if (name == "float" || name == "single") return DType::f32;
  if (name == "double") return DType::f64;
  std::string valid;
  for (const auto& d : kDTypes) valid += (valid.empty() ? "" : ", ") + std::string(d.name);
  throw InvalidInput("unknown dtype '" + std::string(name) + "': expected one of " + valid);
}

}  // namespace halfscope
