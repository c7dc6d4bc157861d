#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/text.h"

namespace tune {
namespace {

constexpr double kTerminalSeconds = 0.1;  // between redraws on a terminal
constexpr double kPipeSeconds = 10;       // between lines into a pipe

size_t TerminalWidth(FILE* out) {
  winsize ws{};
  if (::ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c && std::atoi(c) > 0) return size_t(std::atoi(c));
  return 80;
}

}  // namespace

std::string FormatFailures(const std::map<std::string, uint64_t>& by_class) {
  std::string out;
  for (const auto& [cls, n] : by_class) out += (out.empty() ? "" : ", ") + cls + " " + std::to_string(n);
  return out.empty() ? "none" : out;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

ProgressLine::ProgressLine(FILE* out) : ProgressLine(out, ::isatty(fileno(out)) != 0, int(TerminalWidth(out))) {}

ProgressLine::ProgressLine(FILE* out, bool tty, int width) : out_(out), tty_(tty), width_(size_t(std::max(20, width))) {}

std::string ProgressLine::Text(const SweepProgress& p, double elapsed, size_t width) {
  // Spaces still expanding add their pairs: the total is the start's once
  // every model's space is in.
  // Spaces still expanding add their pairs, and their stored ones to
  // pairs_done: the total and the pace start once every space is in.
  if (!baseline_ && p.expanding.empty()) {
    first_total_ = p.pairs_total;
    baseline_ = p.pairs_done;
    baseline_elapsed_ = elapsed;
  }
  const double frac = p.pairs_total ? double(p.pairs_done) / double(p.pairs_total) : 0;
  // Pairs measured while the line ran: those stored before (a resubmitted or
  // resumed sweep) took no time of this run.
  const uint64_t measured = baseline_ && p.pairs_done > *baseline_ ? p.pairs_done - *baseline_ : 0;
  const double rate = elapsed > baseline_elapsed_ ? double(measured) / (elapsed - baseline_elapsed_) : 0;
  const double left = p.pairs_total > p.pairs_done ? double(p.pairs_total - p.pairs_done) : 0;
  char head[160];
  std::snprintf(head, sizeof head, "%llu/%llu pairs %.1f%%  %.1f/s  ETA %s  failed %llu",
                (unsigned long long)p.pairs_done, (unsigned long long)p.pairs_total, 100 * frac, rate,
                rate > 0 ? FormatDuration(left / rate).c_str() : "?", (unsigned long long)p.pairs_failed);
  std::string text = head;
  if (first_total_ && p.pairs_total > first_total_)
    text += "  (+" + std::to_string(p.pairs_total - first_total_) + " from later passes)";
  if (!p.waiting_for.empty()) text += "  waiting for " + Join(p.waiting_for) + ": no live worker";
  if (!p.expanding.empty()) text += "  expanding spaces for " + Join(p.expanding);
  // A bar on a terminal with room for one (a log reads the figures).
  const size_t bar = tty_ && width >= text.size() + 24 ? std::min<size_t>(30, width - text.size() - 3) : 0;
  if (bar >= 10) {
    const size_t filled = std::min(bar, size_t(frac * double(bar)));
    text = "[" + std::string(filled, '#') + std::string(bar - filled, '.') + "] " + text;
  }
  if (text.size() > width) text.resize(width);
  return text;
}

void ProgressLine::Draw(const SweepProgress& p, double elapsed) {
  if (tty_) {
    // Redrawn in place and never wider than the terminal, so that no frame wraps.
    std::fprintf(out_, "\r%s\x1b[K", Text(p, elapsed, width_ - 1).c_str());
  } else {
    std::fprintf(out_, "%s %s\n", p.name.empty() ? p.sweep_id.c_str() : p.name.c_str(),
                 Text(p, elapsed, 1000).c_str());
  }
  std::fflush(out_);
  last_drawn_ = elapsed;
}

void ProgressLine::Update(const SweepProgress& p, double elapsed) {
  if (elapsed - last_drawn_ >= (tty_ ? kTerminalSeconds : kPipeSeconds)) Draw(p, elapsed);
}

void ProgressLine::Finish(const SweepProgress& p, double elapsed) {
  Draw(p, elapsed);
  if (tty_) std::fprintf(out_, "\n");
  std::fflush(out_);
}

}  // namespace tune
