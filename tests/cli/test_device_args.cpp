// The command line's GPU values (apps/halfscope/device_args.cpp): sizes with binary suffixes and
// the checks of a --devices list that need no device. The CLI runs of the same refusals are in
// tests/python/test_cholesky_cli.py and test_ao_reconstructor_cli.py.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"
#include "halfscope/core/error.hpp"

namespace halfscope::cli {
namespace {

// The message of the InvalidInput that `call` throws ("" when it throws nothing or another type).
template <class Call>
std::string invalid_input_message(Call call) {
  try {
    call();
  } catch (const InvalidInput& e) {
    return e.what();
  } catch (...) {
    return "";
  }
  return "";
}

TEST(ParseSize, PlainBytesAndBinarySuffixes) {
  EXPECT_EQ(parse_size("0", "--device-memory"), 0);
  EXPECT_EQ(parse_size("12345", "--device-memory"), 12345);
  EXPECT_EQ(parse_size("1K", "--device-memory"), 1024);
  EXPECT_EQ(parse_size("3k", "--device-memory"), 3 * 1024);
  EXPECT_EQ(parse_size("12M", "--device-memory"), 12 * 1024 * 1024);
  EXPECT_EQ(parse_size("16G", "--device-memory"), std::int64_t{16} << 30);
  EXPECT_EQ(parse_size("2t", "--device-memory"), std::int64_t{2} << 40);
  EXPECT_EQ(parse_size("007", "--device-memory"), 7);
}

TEST(ParseSize, LargestValuesAndOverflow) {
  EXPECT_EQ(parse_size("9223372036854775807", "--device-memory"), INT64_MAX);
  EXPECT_EQ(parse_size("8388607T", "--device-memory"), std::int64_t{8388607} << 40);
  for (const char* text : {"9223372036854775808", "8388608T", "99999999999999999999G"}) {
    const std::string m = invalid_input_message([&] { parse_size(text, "--device-memory"); });
    EXPECT_NE(m.find("2^63 - 1 bytes"), std::string::npos) << text << ": " << m;
    EXPECT_NE(m.find(std::string("found '") + text + "'"), std::string::npos) << m;
  }
}

TEST(ParseSize, MalformedOrNegativeNamesOptionExpectedAndFound) {
  for (const char* text : {"", "-1", "-1G", "+5", "1.5G", "16GB", "16GiB", "G", "16 G", " 16",
                           "16Q", "0x10", "1e9", "ten"}) {
    const std::string m = invalid_input_message([&] { parse_size(text, "--device-memory"); });
    EXPECT_EQ(m.rfind("--device-memory: expected a size in bytes", 0), 0u) << text << ": " << m;
    EXPECT_NE(m.find("K, M, G or T (powers of 1024"), std::string::npos) << m;
    EXPECT_NE(m.find(std::string("found '") + text + "'"), std::string::npos) << m;
  }
}

TEST(DeviceList, NegativeRepeatedAndCpuRefusedBeforeAnyDeviceQuery) {
  EXPECT_EQ(device_list_text({0, 1, 3}), "0,1,3");
  std::string m = invalid_input_message([] { check_device_list({0, -1}, "auto"); });
  EXPECT_NE(m.find("--devices 0,-1: expected CUDA device indices >= 0, found -1"),
            std::string::npos)
      << m;
  m = invalid_input_message([] { check_device_list({1, 0, 1}, "cuda"); });
  EXPECT_NE(m.find("--devices 1,0,1: expected distinct CUDA device indices, found 1 twice"),
            std::string::npos)
      << m;
  m = invalid_input_message([] { check_device_list({0, 1}, "cpu"); });
  EXPECT_NE(m.find("--devices 0,1: expected a GPU run (--device auto or cuda), found --device cpu"),
            std::string::npos)
      << m;
}

TEST(DeviceList, RefusedOverRanksAndWithAGrid) {
  std::string m = invalid_input_message([] { refuse_gpu_over_ranks("--devices 0", 4, ""); });
  EXPECT_NE(m.find("--devices 0: expected one process"), std::string::npos) << m;
  EXPECT_NE(m.find("found 4 MPI ranks"), std::string::npos) << m;
  m = invalid_input_message([] { refuse_gpu_over_ranks("--device-memory 1G", 1, "1x1"); });
  EXPECT_NE(m.find("--device-memory 1G: expected no --grid"), std::string::npos) << m;
  EXPECT_NE(m.find("found --grid 1x1"), std::string::npos) << m;
  EXPECT_NO_THROW(refuse_gpu_over_ranks("--devices 0", 1, ""));
}

}  // namespace
}  // namespace halfscope::cli
