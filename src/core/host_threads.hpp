// One host thread per task, joined before returning (internal header): the multi-GPU paths run
// each device's share on its own thread (src/mfilter/devices.cpp, src/linalg/solve_devices.cpp).
#pragma once

#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace halfscope::detail {

/// Runs fn(i) for i in [0, n) on n host threads and waits for all of them; returns what each
/// threw (null where it returned), so the caller rethrows in its own order and words. If a thread
/// cannot start, the started ones finish before that error propagates: no thread outlives the
/// call.
template <class Fn>
std::vector<std::exception_ptr> on_threads(std::size_t n, Fn fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  const auto join_all = [&] {
    for (auto& t : threads) t.join();
  };
  try {
    for (std::size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          fn(i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
  } catch (...) {
    join_all();
    throw;
  }
  join_all();
  return errors;
}

}  // namespace halfscope::detail
