// The reconstructor options the MPI tests run ao::test::small_system with
// (test_reconstructor*.cpp): n = 256 slopes, so tiles of 24 give 11 tile rows, the last one
// partial.
#pragma once

#include "halfscope/ao/reconstructor.hpp"
#include "halfscope/core/device.hpp"
#include "halfscope/linalg/policy.hpp"

namespace halfscope::mpi::test {

inline ao::ReconstructorOptions small_system_options(const char* policy, const char* solve_policy,
                                                     ao::TiptiltMethod tiptilt,
                                                     DeviceKind device = DeviceKind::Cpu) {
  ao::ReconstructorOptions o;
  o.policy = linalg::parse_policy(policy);
  o.solve_policy = linalg::parse_policy(solve_policy);
  o.tile = 24;
  o.device = device;
  o.tiptilt = tiptilt;
  return o;
}

}  // namespace halfscope::mpi::test
