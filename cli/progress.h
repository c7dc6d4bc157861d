// The progress of a sweep for a person watching: on a terminal one line
// redrawn in place (never wider than the terminal, at most ten times a
// second); into a pipe or file a plain line every ten seconds, so a log
// stays readable.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "protocol/protocol.h"

namespace tune {

// "42s", "3:07", "1:02:03".
std::string FormatDuration(double seconds);
// "compile_error 10, timeout 2"; "none" when empty.
std::string FormatFailures(const std::map<std::string, uint64_t>& by_class);

class ProgressLine {
 public:
  // A terminal or not, and its width, as `out` is.
  explicit ProgressLine(FILE* out);
  // For tests: `tty` and `width` as given.
  ProgressLine(FILE* out, bool tty, int width);

  // Draws `p` when a frame is due (`elapsed` since the sweep began).
  void Update(const SweepProgress& p, double elapsed_seconds);
  // The last frame, and the end of the line.
  void Finish(const SweepProgress& p, double elapsed_seconds);

  // The text of one frame, at most `width` characters.
  std::string Text(const SweepProgress& p, double elapsed_seconds, size_t width);

 private:
  void Draw(const SweepProgress& p, double elapsed_seconds);

  FILE* out_;
  bool tty_;
  size_t width_;
  double last_drawn_ = -1e9;
  // The total the sweep started with (once its spaces are expanded): later
  // passes (refine, confirm) add work, which the line shows rather than
  // moving the total silently.
  uint64_t first_total_ = 0;
  // Pairs done, and when, at the first frame with every space expanded:
  // stored before this run, not its pace.
  std::optional<uint64_t> baseline_;
  double baseline_elapsed_ = 0;
};

}  // namespace tune
