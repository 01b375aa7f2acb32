// Atomic outputs (halfscope/io/file.hpp): several outputs committed together are all renamed or
// none, when a write error surfaces only as the buffered data reach the disk.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "halfscope/core/error.hpp"
#include "halfscope/io/file.hpp"
#include "test_support.hpp"

namespace halfscope::io {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// Files may grow to `bytes` at most while it lives (SIGXFSZ ignored: a write past it fails
// with EFBIG instead of ending the process).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &previous_);
    rlimit limit = previous_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &previous_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  void (*previous_handler_)(int) = SIG_DFL;
};

TEST(AtomicOutput, CommittedTogetherOrNotAtAll) {
  test::TempDir dir;
  const fs::path a = dir / "a.txt", b = dir / "b.txt";
  put(a, "old a");
  put(b, "old b");
  {
    // b's 3000 bytes sit in the stream's buffer until finish(): the limit fails them there, after
    // a was finished, before either is renamed.
    AtomicOutput out_a(a), out_b(b);
    out_a.write(std::string("new a"));
    out_b.write(std::string(3000, 'b'));
    const FileSizeLimit limit(1024);
    EXPECT_THROW(commit_together({&out_a, &out_b}), IoError);
  }
  EXPECT_EQ(slurp(a), "old a");
  EXPECT_EQ(slurp(b), "old b");
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 2u);  // no temporary left behind

  AtomicOutput out_a(a), out_b(b);
  out_a.write(std::string("new a"));
  out_b.write(std::string(3000, 'b'));
  commit_together({&out_a, nullptr, &out_b});
  EXPECT_EQ(slurp(a), "new a");
  EXPECT_EQ(slurp(b), std::string(3000, 'b'));
}

}  // namespace
}  // namespace halfscope::io
