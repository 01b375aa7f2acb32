// Internal: walking a strided array in C order.
#pragma once

#include <cstdint>
#include <vector>

namespace halfscope::detail {

/// Element offset (in elements) of the C-order `linear` index of a strided array.
inline std::int64_t element_offset(const std::vector<std::int64_t>& shape,
                                   const std::vector<std::int64_t>& strides, std::int64_t linear) {
  std::int64_t off = 0;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return 0;
    off += (linear % shape[i]) * strides[i];
    linear /= shape[i];
  }
  return off;
}

/// Calls f(linear_index, element_offset) for every element in C order, with an odometer so the
/// cost per element is one addition in the common case.
template <class F>
void for_each_offset(const std::vector<std::int64_t>& shape,
                     const std::vector<std::int64_t>& strides, F&& f) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  if (n == 0) return;
  std::vector<std::int64_t> index(shape.size(), 0);
  std::int64_t off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (++index[k] < shape[k]) {
        off += strides[k];
        break;
      }
      off -= (shape[k] - 1) * strides[k];
      index[k] = 0;
    }
  }
}

}  // namespace halfscope::detail
