// libFuzzer target for the pick table that cuts templates (io::cut_templates, what one process
// reads) against the same table read as a rank reads it (io::cut_template_source: the table
// checked whole, then each range's picks read again). Any halfscope::Error is an expected
// rejection, but both readers must give the same message for it (a flat cut: when the templates
// are read), and a table both accept must give the same labels, moveouts, weights and templates,
// whole and in two ranges. Anything else is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/seismic_input.hpp"

namespace {

using halfscope::Array;
using halfscope::DType;

// Three channels of 200 samples at 100 Hz from 2024-01-01; channel 2 starts flat (20 zeros), so
// a pick there is a flat cut.
halfscope::io::SeismicData make_data() {
  halfscope::io::SeismicData d;
  d.data = Array::zeros(DType::f32, {3, 200});
  for (std::int64_t i = 0; i < 600; ++i)
    d.data.data_as<float>()[i] = i >= 400 && i < 420 ? 0.0f : static_cast<float>(i % 37) - 18.5f;
  d.channel_ids = {"XX.A..HHZ", "XX.B..HHZ", "XX.C..HHZ"};
  d.start_ns = 1'704'067'200'000'000'000;
  d.sample_rate = 100.0;
  d.source = "fuzz.npy";
  return d;
}

bool same(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().data(), b.contiguous().data(),
                     static_cast<std::size_t>(a.nbytes())) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const halfscope::io::SeismicData d = make_data();
  // The table as a file (the readers take a path), one per process, removed at exit.
  static const struct TempTable {
    std::string path = "/tmp/halfscope-fuzz-picks-" + std::to_string(getpid()) + ".csv";
    ~TempTable() { std::remove(path.c_str()); }
  } table;
  const std::string& path = table.path;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  constexpr std::int64_t kLength = 8;

  halfscope::io::SeismicTemplates whole;
  std::string whole_error;
  try {
    whole = halfscope::io::cut_templates(d, path, kLength);
  } catch (const halfscope::Error& e) {
    whole_error = e.what();
  }
  const auto samples = halfscope::io::array_samples(d.data);
  std::string ranks_error;
  try {
    const auto cut = halfscope::io::cut_template_source(d, *samples, path, kLength);
    const std::int64_t n = cut.templates->shape()[0], half = n / 2;
    const Array moveouts = cut.moveouts->read(0, n), weights = cut.weights->read(0, n);
    const Array templates = cut.templates->read(0, n);
    if (!whole_error.empty()) std::abort();  // accepted by the ranks' reader alone
    if (cut.labels != whole.labels || !same(moveouts, whole.moveouts) ||
        !same(weights, whole.weights) || !same(templates, whole.templates))
      std::abort();
    // Two ranges, each read again from the table, equal the rows of the whole.
    for (const auto& [a, b] : {std::pair{half, n}, std::pair{std::int64_t{0}, half}})
      if (!same(cut.templates->read(a, b), whole.templates.slice(0, a, b)) ||
          !same(cut.moveouts->read(a, b), whole.moveouts.slice(0, a, b)) ||
          !same(cut.weights->read(a, b), whole.weights.slice(0, a, b)))
        std::abort();
  } catch (const halfscope::Error& e) {
    ranks_error = e.what();
  }
  if (ranks_error != whole_error) std::abort();
  return 0;
}
