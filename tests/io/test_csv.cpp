// CSV: headers, comments, blank lines, CRLF, special values, ragged rows, and bit-exact round
// trips of float64 through the shortest decimal form.
#include <cmath>
#include <cstring>
#include <limits>

#include "halfscope/core/error.hpp"
#include "halfscope/io/csv.hpp"
#include "test_support.hpp"

namespace halfscope {
namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

io::CsvTable table(const std::string& text) {
  return io::parse_csv_table(bytes_of(text), "t.csv");
}

std::vector<double> values(const Array& a) {
  const double* p = a.data_as<double>();
  return std::vector<double>(p, p + a.size());
}

TEST(Csv, NumbersHeaderCommentsAndBlankLines) {
  const auto t = table(
      "\xEF\xBB\xBF# made by hand\r\n"
      "time, \"amp, V\" ,count\r\n"
      "\n"
      "  0.5,\t-1e3 , 7   # trailing comment\r\n"
      "   # indented comment\n"
      "+2,.25,1E-2\n");
  EXPECT_EQ(t.header, (std::vector<std::string>{"time", "amp, V", "count"}));
  ASSERT_EQ(t.data.dtype(), DType::f64);
  ASSERT_EQ(t.data.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(t.data), (std::vector<double>{0.5, -1000, 7, 2, 0.25, 0.01}));
}

TEST(Csv, NoHeaderAndLastLineWithoutNewline) {
  const auto t = table("1,2\n3,4");
  EXPECT_TRUE(t.header.empty());
  EXPECT_EQ(t.data.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(t.data), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Csv, SpecialValues) {
  const auto t = table("nan,NaN,inf,-inf,Infinity,-0,1e-999,-1e-999,4.9e-324\n");
  const auto v = values(t.data);
  ASSERT_EQ(v.size(), 9u);
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(v[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[3], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[4], std::numeric_limits<double>::infinity());
  EXPECT_TRUE(v[5] == 0 && std::signbit(v[5]));
  EXPECT_TRUE(v[6] == 0 && !std::signbit(v[6]));  // below the smallest subnormal: the nearest, 0
  EXPECT_TRUE(v[7] == 0 && std::signbit(v[7]));
  EXPECT_EQ(v[8], std::numeric_limits<double>::denorm_min());
}

void expect_csv_error(const std::string& text, const std::string& needle) {
  try {
    (void)table(text);
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("t.csv: ", 0), 0u) << m;
    EXPECT_NE(m.find(needle), std::string::npos) << m;
  }
}

TEST(Csv, ErrorsNameTheLine) {
  expect_csv_error("a,b\n1,2\n\n3,4,5\n", "line 4 has 3 fields, expected 2 like line 1");
  expect_csv_error("1,2\n3\n", "line 2 has 1 fields, expected 2 like line 1");
  expect_csv_error("x,y\n1,2\n3,oops\n", "line 3, field 2: expected a number, found 'oops'");
  expect_csv_error("1,2\n3,\n", "line 2, field 2: expected a number, found ''");
  expect_csv_error("x\n\"1\"\n", "found quoted text '1'");
  expect_csv_error("\"a,b\n", "line 1: unterminated quoted field");
  expect_csv_error("\"a\"b,c\n", "unexpected 'b' after a quoted field");
  expect_csv_error("1,2\n0x10,3\n", "found '0x10'");
  expect_csv_error("1,2\n1 2,3\n", "found '1 2'");
}

TEST(Csv, EmptyAndHeaderOnlyAreErrors) {
  expect_csv_error("", "no data rows: expected lines of comma-separated numbers, found an empty");
  expect_csv_error("\xEF\xBB\xBF", "no data rows");
  expect_csv_error("# nothing\n\n", "no data rows");
  expect_csv_error("# nothing\n\n", "found only blank lines and comments");
  // A line with text is a header only when data rows follow it: alone, it is a bad data row.
  expect_csv_error("a,b,c\n", "line 1, field 1: expected a number, found 'a'; no data rows");
  expect_csv_error("1,x\n", "line 1, field 2: expected a number, found 'x'; no data rows");
  expect_csv_error("# c\n1,\"2\"\n# c\n", "line 2, field 2: expected a number, found quoted");
  // A header followed by one row is still a header.
  const auto t = table("1,x\n3,4\n");
  EXPECT_EQ(t.header, (std::vector<std::string>{"1", "x"}));
  EXPECT_EQ(values(t.data), (std::vector<double>{3, 4}));
}

TEST(Csv, NumbersBeyondFloat64AreErrors) {
  expect_csv_error("4e999\n", "line 1, field 1: expected a number within float64's range");
  expect_csv_error("1,2\n3,-1e999\n", "line 2, field 2: expected a number within float64's range");
  expect_csv_error("x,y\n1,2\n3,1.8e308\n", "found '1.8e308'");
  const auto t = table("1.7976931348623157e308,0.000000001e310\n");  // the largest finite, 1e301
  EXPECT_EQ(values(t.data)[0], std::numeric_limits<double>::max());
  // A header name that reads as a too-large number is quoted, so it reads back as a header.
  const Array a = Array::from_values<double>(std::vector<double>{1}, {1, 1});
  EXPECT_EQ(io::format_csv(a, {"1e999"}), "\"1e999\"\n1\n");
  EXPECT_EQ(table(io::format_csv(a, {"1e999"})).header, (std::vector<std::string>{"1e999"}));
}

TEST(Csv, Float64RoundTripIsBitExact) {
  std::vector<double> v = {0.1,
                           1.0 / 3.0,
                           -0.0,
                           5e-324,
                           2.2250738585072014e-308,
                           std::numeric_limits<double>::max(),
                           -std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::infinity(),
                           123456789012345678.0,
                           -7.0};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 190; ++i) {
    double d;
    const std::uint64_t bits = (rng() & ~(0x7ffull << 52)) | ((rng() % 2046 + 1) << 52);  // finite
    std::memcpy(&d, &bits, 8);
    v.push_back(d);
  }
  const Array a = Array::from_values<double>(v, {50, 4});
  const std::string text = io::format_csv(a, {"a", "b", "c", "d"});
  const auto t = table(text);
  ASSERT_EQ(t.data.shape(), (Shape{50, 4}));
  EXPECT_EQ(std::memcmp(t.data.data(), a.data(), v.size() * 8), 0);
}

TEST(Csv, EveryDTypeAndRank) {
  for (DType dt : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i8, DType::i16,
                   DType::i32, DType::i64, DType::u8, DType::u16, DType::u32, DType::u64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Array src = Array::from_values<double>(std::vector<double>{1, 2.5, 100, 7, 0, 3}, {6});
    const Array a = src.astype(dt);
    const auto t = table(io::format_csv(a));  // 1-D: one column
    ASSERT_EQ(t.data.shape(), (Shape{6, 1}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data.data_as<double>()[i], a.at_as_double(i));
  }
  // Extreme integers are written exactly, not through double.
  const Array big = Array::from_values<std::int64_t>(
      std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), 9007199254740993},
      {1, 2});
  EXPECT_EQ(io::format_csv(big), "-9223372036854775808,9007199254740993\n");
  const Array u = Array::from_values<std::uint64_t>(std::vector<std::uint64_t>{~0ull}, {});
  EXPECT_EQ(io::format_csv(u), "18446744073709551615\n");
  // float32 in its own shortest form.
  EXPECT_EQ(io::format_csv(Array::from_values<float>(std::vector<float>{0.1f, -2.0f}, {1, 2})),
            "0.1,-2\n");
  EXPECT_THROW((void)io::format_csv(Array::zeros(DType::f32, {2, 2, 2})), InvalidInput);
  EXPECT_THROW((void)io::format_csv(Array::zeros(DType::f32, {2, 2}), {"only one"}), InvalidInput);
  EXPECT_THROW((void)io::format_csv(Array::zeros(DType::f32, {1}), {"a\nb"}), InvalidInput);
}

TEST(Csv, HeaderNamesThatLookLikeNumbersStayHeaders) {
  const std::vector<std::string> header = {"1", "x,y", "", " pad", "say \"hi\"", "#tag"};
  const Array a = Array::from_values<double>(std::vector<double>{1, 2, 3, 4, 5, 6}, {1, 6});
  const auto t = table(io::format_csv(a, header));
  EXPECT_EQ(t.header, header);
  EXPECT_EQ(values(t.data), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(Csv, FilesAndNonContiguousInput) {
  test::TempDir dir;
  Array a = Array::from_values<double>(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Array cols = a.slice(1, 1, 3);
  io::write_csv(dir / "x.csv", cols, {"b", "c"});
  const io::CsvTable t = io::read_csv_table(dir / "x.csv");
  EXPECT_EQ(t.header, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(values(io::read_csv(dir / "x.csv")), (std::vector<double>{2, 3, 5, 6}));
  EXPECT_THROW((void)io::read_csv(dir / "absent.csv"), IoError);
  EXPECT_THROW(io::write_csv(dir / "no" / "x.csv", a), IoError);
}

}  // namespace
}  // namespace halfscope
