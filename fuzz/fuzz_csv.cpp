// libFuzzer target for the CSV reader. Any halfscope::Error is an expected rejection; anything else
// is a bug. A table that parses must read back the same after format_csv (NaN compared as NaN).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "halfscope/core/error.hpp"
#include "halfscope/io/csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  halfscope::io::CsvTable t;
  try {
    t = halfscope::io::parse_csv_table(bytes, "fuzz.csv");
  } catch (const halfscope::Error&) {
    return 0;
  }
  std::string text;
  try {
    text = halfscope::io::format_csv(t.data, t.header);
  } catch (const halfscope::InvalidInput&) {
    return 0;  // e.g. a header name holding a bare '\r', which a CSV line cannot carry
  }
  const auto again = halfscope::io::parse_csv_table(
      std::as_bytes(std::span<const char>(text.data(), text.size())), "again.csv");
  // A table with no data rows and no header comes back as {0, 0}; otherwise shapes must match.
  const bool no_columns = t.header.empty() && t.data.dim(0) == 0;
  if (!no_columns && (again.header != t.header || again.data.shape() != t.data.shape()))
    std::abort();
  const double* x = t.data.data_as<double>();
  const double* y = again.data.data_as<double>();
  for (std::int64_t i = 0; i < again.data.size(); ++i) {
    const bool same =
        std::isnan(x[i]) ? std::isnan(y[i]) : std::memcmp(&x[i], &y[i], sizeof(double)) == 0;
    if (!same) std::abort();
  }
  return 0;
}
