// The progress of a sweep on a terminal and into a pipe (cli/progress.h).
#include "../../cli/progress.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <string>

namespace tune {
namespace {

SweepProgress Progress(uint64_t done, uint64_t total) {
  SweepProgress p;
  p.name = "nightly";
  p.state = "running";
  p.pairs_done = done;
  p.pairs_total = total;
  return p;
}

// What `fn` writes through a ProgressLine on an in-memory stream.
template <typename Fn>
std::string Written(bool tty, int width, Fn&& fn) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  {
    ProgressLine line(f, tty, width);
    fn(line);
  }
  std::fclose(f);
  std::string out(buf, size);
  std::free(buf);
  return out;
}

TEST(ProgressLine, DurationsReadAsHoursMinutesSeconds) {
  EXPECT_EQ(FormatDuration(42), "42s");
  EXPECT_EQ(FormatDuration(187), "3:07");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "?");
}

TEST(ProgressLine, OnATerminalEveryFrameFitsTheWidthAndIsRedrawnInPlace) {
  const std::string out = Written(true, 50, [](ProgressLine& line) {
    SweepProgress p = Progress(0, 1000);
    p.waiting_for = {"h100-80gb-hbm3", "a100-sxm4-80gb"};  // a long tail that must be cut
    for (int i = 0; i <= 100; ++i) {
      p.pairs_done = uint64_t(i * 10);
      line.Update(p, i * 0.05);  // 20 updates a second: about half are drawn
    }
    p.state = "done";
    line.Finish(p, 5.1);
  });
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line, ended once";
  size_t frames = 0;
  for (size_t at = out.find('\r'); at != std::string::npos; at = out.find('\r', at + 1)) {
    const size_t end = out.find("\x1b[K", at);
    ASSERT_NE(end, std::string::npos);
    EXPECT_LE(end - at - 1, 49u) << "a frame wider than the terminal wraps";
    ++frames;
  }
  EXPECT_GE(frames, 30u);
  EXPECT_LE(frames, 60u);
}

TEST(ProgressLine, IntoAPipeItWritesPlainLinesEveryTenSeconds) {
  const std::string out = Written(false, 80, [](ProgressLine& line) {
    for (int s = 0; s <= 60; ++s) line.Update(Progress(uint64_t(s * 10), 600), s);
    SweepProgress p = Progress(600, 600);
    p.state = "done";
    line.Finish(p, 61);
  });
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find("\x1b"), std::string::npos);
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 8u) << out;  // at 0, 10, ..., 60 s, and the last
  EXPECT_NE(out.find("nightly 600/600 pairs 100.0%"), std::string::npos) << out;
}

TEST(ProgressLine, AnEtaInHoursAndWorkThatLaterPassesAddIsNamed) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  ProgressLine line(f, true, 200);
  // While a model's space expands, its pairs join the total: no later pass.
  SweepProgress expanding = Progress(0, 6000);
  expanding.expanding = {"sim-a100"};
  EXPECT_EQ(line.Text(expanding, 0, 200).find("later passes"), std::string::npos);
  line.Text(Progress(0, 10000), 0, 200);  // every space is in
  // 100 of 10000 pairs in 60 s: 99 minutes left.
  EXPECT_NE(line.Text(Progress(100, 10000), 60, 200).find("ETA 1:39:00"), std::string::npos);
  const std::string grown = line.Text(Progress(9000, 10400), 600, 200);
  EXPECT_NE(grown.find("(+400 from later passes)"), std::string::npos) << grown;
  std::fclose(f);
  std::free(buf);
}

TEST(ProgressLine, PairsStoredBeforeTheLineBeganDoNotCountTowardsThePace) {
  char* buf = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&buf, &size);
  ProgressLine line(f, false, 200);
  // A resumed sweep: 9000 pairs were stored before; 100 more in 10 s.
  EXPECT_NE(line.Text(Progress(9000, 10000), 0, 200).find("0.0/s  ETA ?"), std::string::npos);
  // A space's expansion counts its stored pairs as done once it is in: the
  // pace starts then.
  ProgressLine fresh(f, false, 200);
  SweepProgress expanding = Progress(0, 0);
  expanding.expanding = {"sim-a100"};
  fresh.Text(expanding, 0, 200);
  fresh.Text(Progress(9000, 10000), 1, 200);
  const std::string paced = fresh.Text(Progress(9100, 10000), 11, 200);
  EXPECT_NE(paced.find("10.0/s  ETA 1:30"), std::string::npos) << paced;
  const std::string later = line.Text(Progress(9100, 10000), 10, 200);
  EXPECT_NE(later.find("10.0/s  ETA 1:30"), std::string::npos) << later;
  std::fclose(f);
  std::free(buf);
}

}  // namespace
}  // namespace tune
