// Typed errors for halfscope. Library code throws one of these and never calls exit(): the CLI
// maps them to exit status 2 (bad usage or input) or 1 (runtime failure), Python maps them to
// exceptions carrying the same message.
#pragma once

#include <stdexcept>
#include <string>

namespace halfscope {

/// Base of every halfscope error. `exit_status()` is what the CLI returns for it.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  [[nodiscard]] virtual int exit_status() const noexcept { return 1; }
};

/// The caller passed something the operation cannot accept (shape, value, option). Exit 2.
class InvalidInput : public Error {
 public:
  using Error::Error;
  [[nodiscard]] int exit_status() const noexcept override { return 2; }
};

/// A file could not be read, parsed or written: missing, truncated, malformed, unwritable.
/// Messages name the file and what was expected and found. Exit 2.
class IoError : public Error {
 public:
  using Error::Error;
  [[nodiscard]] int exit_status() const noexcept override { return 2; }
};

/// The build or the machine lacks what was asked for (no CUDA, no cuDNN, a method that does not
/// support a precision). The message lists what is supported. Exit 2.
class Unsupported : public Error {
 public:
  using Error::Error;
  [[nodiscard]] int exit_status() const noexcept override { return 2; }
};

/// A CUDA runtime or library call failed. Exit 1.
class CudaError : public Error {
 public:
  using Error::Error;
};

/// Arithmetic failed in a way the result cannot hide: FP16 overflow, NaN produced, a solver that
/// stalled. Exit 1.
class NumericalError : public Error {
 public:
  using Error::Error;
};

/// A Cholesky factorization met a non-positive pivot. Names the tile and the policy. Exit 1.
class NotPositiveDefinite : public NumericalError {
 public:
  using NumericalError::NumericalError;
};

}  // namespace halfscope
