// Matched filtering over MPI ranks that read the data by windows (io::SampleSource): over a day
// long enough that every rank scans sum blocks of its own (mfilter::kSumBlock), the gathered
// stack and the detections (channels used included) equal the one-process CPU call's bit for
// bit, for data in memory and in .npy files (float32, float64 with a large offset that full
// normalization removes, float64 beyond 2^960 that is scaled before its sum); a non-finite sample
// is every rank's error naming the file, the channel and the sample.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "mfilter/data_factors.hpp"
#include "test_mfilter_inputs.hpp"
#include "test_support.hpp"

namespace halfscope::mpi {
namespace {

using testing::bit_identical;
using testing::make_inputs;
using testing::same_detections;

// Four and a half sum blocks: with 4 ranks each scans one or two blocks of its own.
constexpr std::int64_t kSamples = 4 * mfilter::kSumBlock + mfilter::kSumBlock / 2 + 77;
constexpr std::int64_t kTemplates = 20, kChannels = 2, kLength = 24;

// A folder every rank sees (made by rank 0, removed after every rank is done with it).
class SharedDir {
 public:
  explicit SharedDir(const Comm& world) : world_(world) {
    if (world.rank() == 0) dir_.emplace();
    path_ = world.broadcast_string(world.rank() == 0 ? dir_->path().string() : "", 0);
  }
  ~SharedDir() { world_.barrier(); }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;
  // `a` written by rank 0 as `name`, once every rank may read it.
  [[nodiscard]] std::filesystem::path write(const std::string& name, const Array& a) const {
    const std::filesystem::path p = std::filesystem::path(path_) / name;
    if (world_.rank() == 0) io::write_npy(p, a);
    world_.barrier();
    return p;
  }

 private:
  const Comm& world_;
  std::optional<test::TempDir> dir_;
  std::string path_;
};

struct DataCase {
  const char* what;
  DType dtype;
  double offset, scale;
};

TEST(MpiMfilterWindows, StackAndDetectionsEqualOneProcessBitForBit) {
  const Comm world = Comm::world();
  const SharedDir dir(world);
  const auto in = make_inputs(kTemplates, kChannels, kLength, kSamples, 8,
                              {{1000, 150000}, {kSamples / 2}, {kSamples - 2000}});
  for (const DataCase& dc :
       {DataCase{"float32", DType::f32, 0.0, 1.0}, DataCase{"float64 + 1e3", DType::f64, 1e3, 1.0},
        DataCase{"float64 x 2^980", DType::f64, 0.0, 0x1p+980}}) {
    SCOPED_TRACE(dc.what);
    Array data = in.data.clone();
    for (std::int64_t i = 0; i < data.size(); ++i)
      data.data_as<double>()[i] = (data.data_as<double>()[i] + dc.offset) * dc.scale;
    data = data.astype(dc.dtype);
    const std::filesystem::path file = dir.write(std::string(dc.what) + ".npy", data);
    const auto from_file = io::npy_samples(file);
    std::vector<std::pair<Precision, MfNormalize>> calls{{Precision::Double, MfNormalize::Full},
                                                         {Precision::Single, MfNormalize::Short}};
    if (dc.dtype == DType::f32) calls.emplace_back(Precision::Mixed, MfNormalize::Full);
    for (const auto& [precision, normalize] : calls) {
      SCOPED_TRACE(std::string(precision_name(precision)) + " " +
                   std::string(mf_normalize_name(normalize)));
      MfOptions o;
      o.device = DeviceKind::Cpu;
      o.precision = precision;
      o.normalize = normalize;
      const Array whole_array =
          gather_result(world, matched_filter(world, in.templates, data, o, in.network), 0);
      const Array whole_file =
          gather_result(world, matched_filter(world, in.templates, *from_file, o, in.network), 0);
      if (world.rank() == 0) {
        const Array one = halfscope::matched_filter(in.templates, data, o, in.network);
        EXPECT_TRUE(bit_identical(one, whole_array));
        EXPECT_TRUE(bit_identical(one, whole_file));
      }
      // Time parts on every rank: their windows start inside the day.
      const DetectOptions detect{8.0, ThresholdType::Mad, 100};
      const auto expected =
          halfscope::matched_filter_detect(in.templates, data, o, in.network, detect);
      EXPECT_GE(expected.size(), 2u);  // not empty: the comparison means something
      EXPECT_TRUE(
          same_detections(expected, matched_filter_detect(world, in.templates, *from_file, o,
                                                          in.network, detect, {world.size()})));
    }
  }
}

TEST(MpiMfilterWindows, NonFiniteSampleIsEveryRanksErrorNamingTheFile) {
  const Comm world = Comm::world();
  const SharedDir dir(world);
  const auto in = make_inputs(kTemplates, kChannels, kLength, kSamples, 0);
  // Two bad samples: the one in the lowest channel is named, wherever it lies.
  Array data = in.data.astype(DType::f32);
  data.data_as<float>()[kSamples + kSamples - 5] = std::nanf("");
  data.data_as<float>()[3] = std::numeric_limits<float>::infinity();
  data.data_as<float>()[kSamples + 9] = -std::numeric_limits<float>::infinity();
  const std::filesystem::path file = dir.write("bad.npy", data);
  MfOptions o;
  o.device = DeviceKind::Cpu;
  o.normalize = MfNormalize::Full;
  const auto message = [&](auto&& call) {
    try {
      call();
    } catch (const InvalidInput& e) {
      EXPECT_TRUE(failure_was_agreed(e.what())) << e.what();
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error on rank " << world.rank();
    return std::string();
  };
  const auto source = io::npy_samples(file);
  EXPECT_EQ(message([&] { (void)matched_filter(world, in.templates, *source, o, in.network); }),
            "MPI rank 0: " + file.string() +
                ": channel 0, sample 3 is infinite: expected finite "
                "data");
  // Data in memory: the one-process call's message.
  std::string one;
  try {
    (void)halfscope::matched_filter(in.templates, data, o, in.network);
  } catch (const InvalidInput& e) {
    one = e.what();
  }
  EXPECT_EQ(one,
            "matched_filter: data: infinite value (inf) at channel 0, sample 3; expected "
            "finite values (fill gaps with zeros)");
  EXPECT_EQ(
      message([&] { (void)matched_filter_detect(world, in.templates, data, o, in.network, {}); }),
      "MPI rank 0: " + one);
  // Every rank is still in step.
  for (const std::int64_t i : {std::int64_t{3}, kSamples + kSamples - 5, kSamples + 9})
    data.data_as<float>()[i] = 0.0f;
  EXPECT_NO_THROW((void)matched_filter(world, in.templates, data, o, in.network));
}

}  // namespace
}  // namespace halfscope::mpi
