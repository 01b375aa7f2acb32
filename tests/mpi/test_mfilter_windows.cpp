// Matched filtering over MPI ranks that read the data by windows (io::SampleSource) and the
// templates by groups (io::TemplateSource): over a day long enough that every rank scans sum
// blocks of its own (mfilter::kSumBlock), the gathered stack and the detections (channels used
// included) equal the one-process CPU call's bit for bit, for data in memory and in .npy files
// (float32, float64 with a large offset that full normalization removes, float64 beyond 2^960
// that is scaled before its sum); so do they for banks of templates in .npy files (float32 in C
// order, float64 in Fortran order) read group by group; a non-finite sample or template value is
// every rank's error naming the file and where the value lies. The network (moveouts and weights)
// read by rows from .npy tables, each rank its template group's, gives the same bits and
// detections, and the whole call's moveout spread reduced over the ranks; a non-finite weight is
// the error of the rank whose group holds it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halfscope/core/error.hpp"
#include "halfscope/io/npy.hpp"
#include "halfscope/io/sample_source.hpp"
#include "halfscope/io/table_source.hpp"
#include "halfscope/io/template_source.hpp"
#include "halfscope/mpi/comm.hpp"
#include "halfscope/mpi/mfilter.hpp"
#include "mfilter/data_factors.hpp"
#include "mfilter/devices.hpp"
#include "mpi/mfilter_share.hpp"
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

// The message of the InvalidInput that `call` throws on this rank: an agreed failure.
template <class F>
std::string agreed_message(const Comm& world, F&& call) {
  try {
    call();
  } catch (const InvalidInput& e) {
    EXPECT_TRUE(failure_was_agreed(e.what())) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error on rank " << world.rank();
  return "";
}

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
      const Array whole_file = gather_result(
          world,
          matched_filter(world, *io::array_templates(in.templates), *from_file, o, in.network), 0);
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
      EXPECT_TRUE(same_detections(
          expected, matched_filter_detect(world, *io::array_templates(in.templates), *from_file, o,
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
  const auto message = [&](auto&& call) { return agreed_message(world, call); };
  const auto source = io::npy_samples(file);
  const auto bank = io::array_templates(in.templates);
  EXPECT_EQ(message([&] { (void)matched_filter(world, *bank, *source, o, in.network); }),
            "MPI rank 0: " + file.string() +
                ": channel 0, sample 3 is infinite: expected finite "
                "data");
  // Data in memory: the one-process call's message.
  const std::string one = test::message_of<InvalidInput>(
      [&] { (void)halfscope::matched_filter(in.templates, data, o, in.network); });
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

// A bank of 70 templates (five groups of 16 but the last): 1, 2 or 4 template groups over the
// ranks, each rank reading only its group's templates from the file.
constexpr std::int64_t kBankTemplates = 70, kBankSamples = 6000;

// `a` as a Fortran-order array of the same values (any dtype and number of axes).
Array fortran_copy(const Array& a) {
  const Array c = a.contiguous();
  auto buffer = Buffer::allocate(c.nbytes(), Memory::host);
  Array f(buffer, c.dtype(), c.shape(), f_strides(c.shape()));
  const auto* from = static_cast<const std::byte*>(c.data());
  auto* to = static_cast<std::byte*>(f.data());
  const std::int64_t es = c.itemsize();
  for (std::int64_t i = 0; i < c.size(); ++i) {
    // The element's indices from its C-order index, then its Fortran-order place.
    std::int64_t rest = i, place = 0, stride = 1;
    std::vector<std::int64_t> index(c.shape().size());
    for (std::size_t ax = index.size(); ax-- > 0;) {
      index[ax] = rest % c.shape()[ax];
      rest /= c.shape()[ax];
    }
    for (std::size_t ax = 0; ax < index.size(); ++ax) {
      place += index[ax] * stride;
      stride *= c.shape()[ax];
    }
    std::memcpy(to + place * es, from + i * es, static_cast<std::size_t>(es));
  }
  return f;
}

TEST(MpiMfilterWindows, TemplatesReadByGroupsEqualOneProcessBitForBit) {
  const Comm world = Comm::world();
  const SharedDir dir(world);
  // Events of templates in the first, second and last groups of four ranks.
  std::vector<std::vector<std::int64_t>> plants(66);
  plants[0] = {700};
  plants[1] = {2500};
  plants[40] = {4000};
  plants[65] = {5100};
  const auto in = make_inputs(kBankTemplates, kChannels, kLength, kBankSamples, 8, plants);
  const auto samples = io::array_samples(in.data);
  struct BankCase {
    const char* what;
    Array templates;  // as one process reads the file
    Array written;
  };
  const Array f32 = in.templates.astype(DType::f32);
  for (const BankCase& bc :
       {BankCase{"float32", f32, f32},
        BankCase{"float64 Fortran order", in.templates, fortran_copy(in.templates)}}) {
    SCOPED_TRACE(bc.what);
    const auto bank = io::npy_templates(dir.write(std::string(bc.what) + ".npy", bc.written));
    for (const Precision precision : {Precision::Double, Precision::Single, Precision::Split}) {
      SCOPED_TRACE(precision_name(precision));
      MfOptions o;
      o.device = DeviceKind::Cpu;
      o.precision = precision;
      const MfPart part = matched_filter(world, *bank, *samples, o, in.network);
      EXPECT_EQ(part.share.template_groups, std::min<std::int64_t>(world.size(), 5));
      const Array whole = gather_result(world, part, 0);
      if (world.rank() == 0) {
        EXPECT_TRUE(
            bit_identical(halfscope::matched_filter(bc.templates, in.data, o, in.network), whole));
      }
      const DetectOptions detect{7.0, ThresholdType::Mad, 100};
      const auto expected =
          halfscope::matched_filter_detect(bc.templates, in.data, o, in.network, detect);
      EXPECT_GE(expected.size(), 4u);  // the planted templates: the comparison means something
      EXPECT_TRUE(same_detections(
          expected, matched_filter_detect(world, *bank, *samples, o, in.network, detect)));
    }
  }
}

TEST(MpiMfilterWindows, NonFiniteTemplateIsEveryRanksErrorFromItsGroupsRank) {
  const Comm world = Comm::world();
  const SharedDir dir(world);
  const auto in = make_inputs(kBankTemplates, kChannels, kLength, kBankSamples, 8);
  Array bad = in.templates.clone();
  bad.data_as<double>()[(37 * kChannels + 1) * kLength + 5] = std::nan("");
  bad.data_as<double>()[(60 * kChannels + 0) * kLength + 2] = HUGE_VAL;
  const std::filesystem::path file = dir.write("bad.npy", bad);
  MfOptions o;
  o.device = DeviceKind::Cpu;
  // The rank reporting it: the lowest one whose template group holds template 37.
  const std::int64_t n_corr = mf_correlation_count(kBankSamples, kLength, 1);
  int owner = 0;
  while (mf_share(owner, world.size(), kBankTemplates, n_corr).template_end <= 37) ++owner;
  const auto message = [&](auto&& call) { return agreed_message(world, call); };
  const auto samples = io::array_samples(in.data);
  EXPECT_EQ(message([&] {
              (void)matched_filter(world, *io::npy_templates(file), *samples, o, in.network);
            }),
            "MPI rank " + std::to_string(owner) + ": " + file.string() +
                ": template 37, channel 1, sample 5 is nan: expected a finite value");
  // Templates in memory: the one-process call's message, from the same rank.
  const std::string one = test::message_of<InvalidInput>(
      [&] { (void)halfscope::matched_filter(bad, in.data, o, in.network); });
  EXPECT_EQ(one,
            "matched_filter: templates: NaN (nan) at template 37, channel 1, sample 5; expected "
            "finite values");
  EXPECT_EQ(
      message([&] { (void)matched_filter_detect(world, bad, in.data, o, in.network, {8.0}); }),
      "MPI rank " + std::to_string(owner) + ": " + one);
  // Every rank is still in step.
  EXPECT_NO_THROW((void)matched_filter(world, in.templates, in.data, o, in.network));
}

// The network of a 70-template bank as .npy tables: moveouts int32 in C order, weights float32
// in Fortran order; template 66's channel 1 moved far, so the largest moveout spread of a
// 16-template tile lies in the last group alone.
struct NetworkFiles {
  MfNetwork arrays;  // what one process is given
  MfNetworkTables tables;
};

NetworkFiles network_files(const SharedDir& dir, const MfNetwork& network) {
  NetworkFiles n;
  n.arrays.moveouts = network.moveouts.astype(DType::i32);
  n.arrays.moveouts.data_as<std::int32_t>()[66 * kChannels + 1] += 900;
  n.arrays.weights = network.weights.astype(DType::f32);
  n.tables.moveouts = io::npy_table(dir.write("moveouts.npy", n.arrays.moveouts), "moveouts");
  n.tables.weights =
      io::npy_table(dir.write("weights.npy", fortran_copy(n.arrays.weights)), "weights");
  return n;
}

TEST(MpiMfilterWindows, NetworkReadByRowsEqualsOneProcessBitForBit) {
  const Comm world = Comm::world();
  const SharedDir dir(world);
  std::vector<std::vector<std::int64_t>> plants(66);
  plants[0] = {700};
  plants[40] = {4000};
  plants[65] = {5100};
  const auto in = make_inputs(kBankTemplates, kChannels, kLength, kBankSamples, 8, plants);
  const NetworkFiles net = network_files(dir, in.network);
  const auto bank = io::npy_templates(dir.write("bank.npy", in.templates));
  const auto samples = io::array_samples(in.data);
  for (const Precision precision : {Precision::Double, Precision::Single, Precision::Split}) {
    for (const MfSplit split : {MfSplit{}, MfSplit{world.size()}}) {
      SCOPED_TRACE(std::string(precision_name(precision)) + ", time parts " +
                   std::to_string(split.time_parts));
      MfOptions o;
      o.device = DeviceKind::Cpu;
      o.precision = precision;
      const Array whole =
          gather_result(world, matched_filter(world, *bank, *samples, o, net.tables, split), 0);
      if (world.rank() == 0) {
        EXPECT_TRUE(
            bit_identical(halfscope::matched_filter(in.templates, in.data, o, net.arrays), whole));
      }
      const DetectOptions detect{7.0, ThresholdType::Mad, 100};
      const auto expected =
          halfscope::matched_filter_detect(in.templates, in.data, o, net.arrays, detect);
      EXPECT_GE(expected.size(), 3u);  // the planted templates: the comparison means something
      EXPECT_TRUE(same_detections(
          expected, matched_filter_detect(world, *bank, *samples, o, net.tables, detect, split)));
    }
  }
  // The whole call's largest 16-template moveout spread (which the GPU kernels tile by), from
  // each rank's rows of the tables.
  MfOptions o;
  o.device = DeviceKind::Cpu;
  const mfilter::Prepared whole = mfilter::prepare(in.templates, in.data, o, net.arrays);
  const mfilter::Prepared p =
      mf::prepare_everywhere(world, mfilter::ArrayInfo::of(in.templates),
                             mfilter::ArrayInfo::of(in.data), o, net.tables, "test");
  EXPECT_TRUE(p.moveouts.empty());  // no rank holds the whole network
  const MfShare s = mf_share(world.rank(), world.size(), kBankTemplates, p.dims.n_corr);
  const mf::GroupNetwork g =
      mf::group_network(world, net.tables, p, s.template_begin, s.template_end);
  EXPECT_GE(mfilter::tile_moveout_spread(whole), 900);
  EXPECT_EQ(g.tile_spread, mfilter::tile_moveout_spread(whole));
  const auto rows = static_cast<std::size_t>(s.template_end - s.template_begin) * kChannels;
  ASSERT_EQ(g.rows.moveouts.size(), rows);
  const auto first = static_cast<std::ptrdiff_t>(s.template_begin * kChannels);
  EXPECT_TRUE(
      std::equal(g.rows.moveouts.begin(), g.rows.moveouts.end(), whole.moveouts.begin() + first));
  EXPECT_TRUE(
      std::equal(g.rows.weights.begin(), g.rows.weights.end(), whole.weights.begin() + first));
}

TEST(MpiMfilterWindows, NetworkErrorsNameTheFileAndComeFromTheGroupsRank) {
  const Comm world = Comm::world();
  const SharedDir dir(world);
  const auto in = make_inputs(kBankTemplates, kChannels, kLength, kBankSamples, 8);
  const auto bank = io::array_templates(in.templates);
  const auto samples = io::array_samples(in.data);
  MfOptions o;
  o.device = DeviceKind::Cpu;
  const auto message = [&](auto&& call) { return agreed_message(world, call); };
  // A non-finite weight: the lowest rank whose template group holds template 37 reports it.
  Array bad = in.network.weights.clone();
  bad.data_as<double>()[37 * kChannels + 1] = std::nan("");
  bad.data_as<double>()[60 * kChannels + 0] = HUGE_VAL;
  const std::int64_t n_corr = mf_correlation_count(kBankSamples, kLength, 1);
  int owner = 0;
  while (mf_share(owner, world.size(), kBankTemplates, n_corr).template_end <= 37) ++owner;
  const std::string rank = "MPI rank " + std::to_string(owner) + ": ";
  const std::filesystem::path file = dir.write("bad_weights.npy", bad);
  MfNetworkTables tables{in.network};
  tables.weights = io::npy_table(file, "weights");
  EXPECT_EQ(message([&] { (void)matched_filter(world, *bank, *samples, o, tables); }),
            rank + file.string() + ": weights [37, 1] is not finite: expected a real");
  // Weights in memory: the one-process call's message.
  const MfNetwork in_memory{in.network.moveouts, bad};
  const std::string one = test::message_of<InvalidInput>(
      [&] { (void)halfscope::matched_filter(in.templates, in.data, o, in_memory); });
  EXPECT_EQ(one,
            "matched_filter: weights: NaN (nan) at template 37, channel 1; expected finite values");
  EXPECT_EQ(message([&] {
              (void)matched_filter_detect(world, in.templates, in.data, o, in_memory, {8.0});
            }),
            rank + one);
  // Shapes and the moveouts' type are checked from the headers, on every rank alike.
  MfNetworkTables wrong{in.network};
  const Array three = Array::zeros(DType::i64, {kBankTemplates, 3});
  wrong.moveouts = io::npy_table(dir.write("three.npy", three), "moveouts");
  EXPECT_EQ(message([&] { (void)matched_filter(world, *bank, *samples, o, wrong); }),
            "MPI rank 0: matched_filter: moveouts: expected shape [70, 2] (templates, channels), "
            "found " +
                wrong.moveouts->describe());
  wrong.moveouts =
      io::npy_table(dir.write("float.npy", in.network.weights.astype(DType::f32)), "moveouts");
  EXPECT_EQ(message([&] { (void)matched_filter(world, *bank, *samples, o, wrong); }),
            "MPI rank 0: matched_filter: moveouts: expected integers (samples), found " +
                wrong.moveouts->describe());
  // Every rank is still in step.
  EXPECT_NO_THROW((void)matched_filter(world, *bank, *samples, o, in.network));
}

}  // namespace
}  // namespace halfscope::mpi
