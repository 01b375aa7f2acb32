// Element types an Array can hold, with their sizes and NumPy-style names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "halfscope/core/half.hpp"

namespace halfscope {

/// Element type of an Array. The names follow NumPy (`float32`, `uint16`, ...).
enum class DType : std::uint8_t { f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64 };

/// Bytes per element.
constexpr std::int64_t dtype_size(DType t) noexcept {
  switch (t) {
    case DType::i8:
    case DType::u8:
      return 1;
    case DType::f16:
    case DType::bf16:
    case DType::i16:
    case DType::u16:
      return 2;
    case DType::f32:
    case DType::i32:
    case DType::u32:
      return 4;
    case DType::f64:
    case DType::i64:
    case DType::u64:
      return 8;
  }
  return 0;
}

constexpr bool dtype_is_float(DType t) noexcept {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}
constexpr bool dtype_is_signed_int(DType t) noexcept {
  return t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64;
}

/// NumPy name: "float16", "bfloat16", "float32", ..., "uint64".
std::string_view dtype_name(DType t) noexcept;

/// Parses a NumPy name ("float32", "f4", "int16", ...). Throws InvalidInput listing the names.
DType parse_dtype(std::string_view name);

namespace detail {
template <class T>
struct DTypeOf;
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::f16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::bf16;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int8_t> {
  static constexpr DType value = DType::i8;
};
template <>
struct DTypeOf<std::int16_t> {
  static constexpr DType value = DType::i16;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::u8;
};
template <>
struct DTypeOf<std::uint16_t> {
  static constexpr DType value = DType::u16;
};
template <>
struct DTypeOf<std::uint32_t> {
  static constexpr DType value = DType::u32;
};
template <>
struct DTypeOf<std::uint64_t> {
  static constexpr DType value = DType::u64;
};
}  // namespace detail

/// The DType of a C++ element type: `dtype_of<float>` is `DType::f32`.
template <class T>
inline constexpr DType dtype_of = detail::DTypeOf<std::remove_cv_t<T>>::value;

/// Calls `f(T{})` with T the C++ type of `t`: the one place a runtime dtype becomes a type.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f16:
      return f(Half{});
    case DType::bf16:
      return f(BFloat16{});
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::i8:
      return f(std::int8_t{});
    case DType::i16:
      return f(std::int16_t{});
    case DType::i32:
      return f(std::int32_t{});
    case DType::i64:
      return f(std::int64_t{});
    case DType::u8:
      return f(std::uint8_t{});
    case DType::u16:
      return f(std::uint16_t{});
    case DType::u32:
      return f(std::uint32_t{});
    case DType::u64:
      return f(std::uint64_t{});
  }
  return f(double{});  // unreachable: every enumerator is handled above
}

}  // namespace halfscope
