// Waveform segments: ids, merging with gap bookkeeping, and UTC calendar arithmetic.
#include "halfscope/io/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "halfscope/core/error.hpp"
#include "io/merge_plan.hpp"

namespace halfscope::io {

namespace {

constexpr std::int64_t kNsPerSecond = 1'000'000'000;
constexpr std::int64_t kNsPerDay = 86'400 * kNsPerSecond;
// Longest trace zero-filling may build (a month at 100 Hz): a gap of years between two records
// must not turn into an allocation of gigabytes.
constexpr std::int64_t kMaxFilledSamples = std::int64_t{1} << 28;

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's civil-days algorithm: eras of
// 400 years so that negative years and dates before the epoch need no special case).
std::int64_t days_from_civil(std::int64_t y, std::int64_t m, std::int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void civil_from_days(std::int64_t z, std::int64_t& y, std::int64_t& m, std::int64_t& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = yoe + era * 400 + (m <= 2 ? 1 : 0);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Rounds to int64, saturating: hostile sample rates (1e-30 Hz) must not overflow time arithmetic.
std::int64_t saturate(double x) {
  constexpr double lim = 9.2e18;  // just inside int64
  if (!(x > -lim)) return x != x ? 0 : static_cast<std::int64_t>(-lim);
  if (x > lim) return static_cast<std::int64_t>(lim);
  return std::llround(x);
}

std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<std::int64_t>::max()
               : std::numeric_limits<std::int64_t>::min();
}

// Samples of a segment at `rate` spanning `samples` periods, in ns (rounded).
std::int64_t span_ns(std::int64_t samples, double rate) {
  return saturate(static_cast<double>(samples) * 1e9 / rate);
}

void check_trace(const Trace& t) {
  if (!t.data.empty() && t.data.ndim() != 1)
    throw InvalidInput(t.id() + ": trace data must be 1-D, got " + t.data.describe());
  if (!(t.sample_rate > 0.0) || !std::isfinite(t.sample_rate))
    throw InvalidInput(t.id() + ": sample rate must be positive and finite, got " +
                       std::to_string(t.sample_rate));
}

bool same_rate(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max(a, b);
}

}  // namespace

std::string Trace::id() const {
  return network + "." + station + "." + location + "." + channel;
}

std::int64_t trace_end_ns(std::int64_t start_ns, std::int64_t samples, double rate) {
  if (!(rate > 0.0)) return start_ns;
  return saturating_add(start_ns, span_ns(samples, rate));
}

std::int64_t Trace::end_ns() const {
  return trace_end_ns(start_ns, size(), sample_rate);
}

namespace detail {

MergePlan plan_merge(const std::vector<TraceMeta>& in, bool fill_gaps_with_zero) {
  std::vector<std::string> order;
  std::unordered_map<std::string, std::vector<std::int64_t>> groups;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i].size == 0) continue;  // an empty segment adds no samples and no timing
    auto [it, inserted] = groups.try_emplace(in[i].id);
    if (inserted) order.push_back(in[i].id);
    it->second.push_back(static_cast<std::int64_t>(i));
  }

  MergePlan out;
  for (const std::string& id : order) {
    auto& group = groups[id];
    const auto meta = [&](std::int64_t i) -> const TraceMeta& {
      return in[static_cast<std::size_t>(i)];
    };
    std::stable_sort(group.begin(), group.end(), [&](std::int64_t a, std::int64_t b) {
      return meta(a).start_ns < meta(b).start_ns;
    });
    PlannedTrace cur;
    bool open = false;
    const auto start = [&](std::int64_t i) {
      cur = PlannedTrace{i, meta(i).size, {PlanPiece{i, 0, meta(i).size}}};
      open = true;
    };
    for (const std::int64_t i : group) {
      const TraceMeta& t = meta(i);
      const std::int64_t n = t.size;
      if (open && (!same_rate(meta(cur.head).sample_rate, t.sample_rate) ||
                   meta(cur.head).dtype != t.dtype)) {
        out.traces.push_back(std::move(cur));
        open = false;
      }
      if (!open) {
        start(i);
        continue;
      }
      const double rate = meta(cur.head).sample_rate;
      const std::int64_t expected = trace_end_ns(meta(cur.head).start_ns, cur.count, rate);
      const double period_ns = 1e9 / rate;
      const std::int64_t missing =
          saturate((static_cast<double>(t.start_ns) - static_cast<double>(expected)) / period_ns);
      if (missing == 0) {
        cur.pieces.push_back({i, 0, n});
        cur.count += n;
        continue;
      }
      if (missing > 0) {
        out.gaps.push_back({id, expected, t.start_ns, missing});
        if (fill_gaps_with_zero) {
          if (missing > kMaxFilledSamples - cur.count - n)
            throw InvalidInput(id + ": zero-filling the gap of " + std::to_string(missing) +
                               " samples from " + format_iso8601(expected, 6) +
                               " would make a trace longer than 2^28 samples; merge without "
                               "filling");
          cur.pieces.push_back({-1, 0, missing});
          cur.pieces.push_back({i, 0, n});
          cur.count += missing + n;
          continue;
        }
      } else {
        const std::int64_t dropped = std::min(n, -missing);
        out.gaps.push_back({id, t.start_ns,
                            std::min(expected, trace_end_ns(t.start_ns, n, t.sample_rate)),
                            -dropped});
        if (fill_gaps_with_zero) {
          // Keep the earlier segment's samples; the later one continues after the overlap.
          if (dropped < n) {
            cur.pieces.push_back({i, dropped, n});
            cur.count += n - dropped;
          }
          continue;
        }
      }
      out.traces.push_back(std::move(cur));
      start(i);
    }
    if (open) out.traces.push_back(std::move(cur));
  }
  return out;
}

}  // namespace detail

Waveforms merge_traces(const Waveforms& in, bool fill_gaps_with_zero) {
  std::vector<detail::TraceMeta> metas;
  for (const Trace& t : in.traces) {
    if (t.size() > 0) check_trace(t);
    metas.push_back({t.id(), t.start_ns, t.sample_rate,
                     t.data.empty() ? DType::f32 : t.data.dtype(), t.size()});
  }
  const detail::MergePlan plan = detail::plan_merge(metas, fill_gaps_with_zero);
  Waveforms out;
  out.gaps = plan.gaps;
  for (const detail::PlannedTrace& pt : plan.traces) {
    const Trace& head = in.traces[static_cast<std::size_t>(pt.head)];
    Trace t{head.network,  head.station,     head.location, head.channel,
            head.start_ns, head.sample_rate, Array()};
    const auto& first = pt.pieces.front();
    if (pt.pieces.size() == 1 && first.input >= 0) {
      t.data = head.data;  // nothing to join: keep the input's array
      out.traces.push_back(std::move(t));
      continue;
    }
    const DType dtype = head.data.dtype();
    Array data(dtype, Shape{pt.count});
    auto* dst = static_cast<unsigned char*>(data.data());
    const std::int64_t item = dtype_size(dtype);
    for (const detail::PlanPiece& p : pt.pieces) {
      const std::int64_t bytes = (p.end - p.begin) * item;
      if (p.input < 0) {
        std::memset(dst, 0, static_cast<std::size_t>(bytes));  // 0 and 0.0 are all-zero bits
      } else {
        const Array c =
            in.traces[static_cast<std::size_t>(p.input)].data.slice(0, p.begin, p.end).contiguous();
        std::memcpy(dst, c.data(), static_cast<std::size_t>(bytes));
      }
      dst += bytes;
    }
    t.data = data;
    out.traces.push_back(std::move(t));
  }
  return out;
}

std::int64_t utc_to_ns(std::int64_t year, std::int64_t day_of_year, std::int64_t hour,
                       std::int64_t minute, std::int64_t second, std::int64_t nanosecond) {
  // int64 ns cover the years 1677..2262; anything outside cannot be represented.
  if (year < 1677 || year > 2262)
    throw InvalidInput("year " + std::to_string(year) +
                       " is outside the range of ns timestamps (1677..2262)");
  const std::int64_t days = days_from_civil(year, 1, 1) + day_of_year - 1;
  const __int128 ns = static_cast<__int128>(days) * kNsPerDay +
                      static_cast<__int128>(hour * 3600 + minute * 60 + second) * kNsPerSecond +
                      nanosecond;
  if (ns < std::numeric_limits<std::int64_t>::min() ||
      ns > std::numeric_limits<std::int64_t>::max())
    throw InvalidInput("time in year " + std::to_string(year) +
                       " is outside the range of ns timestamps");
  return static_cast<std::int64_t>(ns);
}

UtcFields ns_to_utc(std::int64_t ns) {
  UtcFields f{};
  const std::int64_t days = floor_div(ns, kNsPerDay);
  std::int64_t rem = ns - days * kNsPerDay;  // in [0, one day)
  civil_from_days(days, f.year, f.month, f.day);
  f.day_of_year = days - days_from_civil(f.year, 1, 1) + 1;
  f.hour = rem / (3600 * kNsPerSecond);
  rem -= f.hour * 3600 * kNsPerSecond;
  f.minute = rem / (60 * kNsPerSecond);
  rem -= f.minute * 60 * kNsPerSecond;
  f.second = rem / kNsPerSecond;
  f.nanosecond = rem - f.second * kNsPerSecond;
  return f;
}

std::string format_iso8601(std::int64_t ns, int fraction_digits) {
  fraction_digits = std::clamp(fraction_digits, 0, 9);
  const UtcFields f = ns_to_utc(ns);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld",
                static_cast<long long>(f.year), static_cast<long long>(f.month),
                static_cast<long long>(f.day), static_cast<long long>(f.hour),
                static_cast<long long>(f.minute), static_cast<long long>(f.second));
  std::string s = buf;
  if (fraction_digits > 0) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%09lld", static_cast<long long>(f.nanosecond));
    s.append(frac, static_cast<std::size_t>(1 + fraction_digits));
  }
  return s + "Z";
}

std::int64_t parse_iso8601(std::string_view text) {
  const auto fail = [&](const std::string& why) -> std::int64_t {
    throw InvalidInput("time '" + std::string(text) +
                       "': expected YYYY-MM-DDTHH:MM:SS[.fraction]Z, " + why);
  };
  std::size_t pos = 0;
  const auto number = [&](std::size_t digits, std::int64_t lo, std::int64_t hi, const char* what) {
    std::int64_t v = 0;
    for (std::size_t i = 0; i < digits; ++i, ++pos) {
      if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
        fail(std::string("found no ") + std::to_string(digits) + "-digit " + what);
      v = v * 10 + (text[pos] - '0');
    }
    if (v < lo || v > hi) fail(std::string(what) + " " + std::to_string(v) + " out of range");
    return v;
  };
  const auto expect = [&](std::string_view chars, const char* what) {
    if (pos >= text.size() || chars.find(text[pos]) == std::string_view::npos)
      fail(std::string("missing ") + what);
    ++pos;
  };
  const std::int64_t year = number(4, 0, 9999, "year");
  expect("-", "'-' after the year");
  const std::int64_t month = number(2, 1, 12, "month");
  expect("-", "'-' after the month");
  const std::int64_t day = number(2, 1, 31, "day");
  expect("T ", "'T' between date and time");
  const std::int64_t hour = number(2, 0, 23, "hour");
  expect(":", "':' after the hour");
  const std::int64_t minute = number(2, 0, 59, "minute");
  expect(":", "':' after the minute");
  const std::int64_t second = number(2, 0, 59, "second");
  std::int64_t nanos = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (++digits > 9) fail("more than 9 fraction digits");
      nanos = nanos * 10 + (text[pos++] - '0');
    }
    if (digits == 0) fail("no digits after '.'");
    for (int i = digits; i < 9; ++i) nanos *= 10;
  }
  if (pos < text.size() && text[pos] == 'Z') ++pos;
  if (pos != text.size()) fail("trailing characters");
  std::int64_t y = 0, m = 0, d = 0;
  civil_from_days(days_from_civil(year, month, day), y, m, d);
  if (m != month || d != day) fail("no such day in that month");
  const std::int64_t doy = days_from_civil(year, month, day) - days_from_civil(year, 1, 1) + 1;
  try {
    return utc_to_ns(year, doy, hour, minute, second, nanos);
  } catch (const InvalidInput& e) {
    return fail(e.what());
  }
}

}  // namespace halfscope::io
