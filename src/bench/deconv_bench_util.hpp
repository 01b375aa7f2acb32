// Internal pieces of `bench deconv` shared by its source files (deconv_bench*.cpp).
#pragma once

#include <string>
#include <vector>

#include "halfscope/bench/deconv_bench.hpp"

namespace halfscope::bench::detail {

/// "37db" for 37 (the file-name tag of an SNR; "%g").
std::string snr_tag(double snr_db);

/// Writes the inputs and the exact solutions (one per SNR) into options.dump_dir (see
/// DeconvBenchOptions::dump_dir). IoError when the folder cannot be made or written.
void dump_inputs(const DeconvBenchOptions& options, const DeconvBenchInputs& inputs,
                 const std::vector<Array>& exact);

/// Study 000 Fig. 8: H f of the sky in half and in mixed against single, on `device` (a resolved
/// device), one case each (and the PNG of the squared difference in half when asked).
std::vector<BenchCase> fig8_cases(const DeconvBenchOptions& options,
                                  const DeconvBenchInputs& inputs, DeviceKind device);

}  // namespace halfscope::bench::detail
