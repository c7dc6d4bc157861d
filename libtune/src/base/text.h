// Text from peers, files and stores: the one home of what counts as valid
// text in tunefarm.
//
// Every Text field of the wire protocol is checked with CheckText when an
// envelope is decoded, so invalid UTF-8 never reaches the scheduler, the
// store or a JSON writer from a live peer. Stores written before that check
// may still hold such bytes: writers of JSON and reports replace them
// (DumpJson, ToValidUtf8) and never throw.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tune/status.h"

namespace tune {

// Upper bounds on a decoded Text field, in bytes. Names, ids, versions and
// keys are short; a failure message may carry a compile log; a reason or an
// error text is for people.
inline constexpr size_t kMaxNameBytes = 4 << 10;
inline constexpr size_t kMaxMessageBytes = 64 << 10;
inline constexpr size_t kMaxLogBytes = 1 << 20;

// True when `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF). NUL bytes are valid UTF-8 here;
// callers that cannot hold them (store keys) refuse them themselves.
bool IsValidUtf8(std::string_view s);

// `s` with each byte that does not start or continue a well-formed sequence
// replaced by U+FFFD: what a report or log line prints of stored text.
std::string ToValidUtf8(std::string_view s);

// OK when `s` is valid UTF-8 of at most `max_bytes`; otherwise an error
// naming `field` ("hello.workerName is not valid UTF-8 (byte 3)").
Status CheckText(std::string_view s, std::string_view field, size_t max_bytes);

// The bytes [data, data + n) as lower-case hex, two digits a byte.
std::string HexOf(const void* data, size_t n);
// True when `s` is `digits` lower-case hex digits (what HexOf writes).
bool IsHex(std::string_view s, size_t digits);

// The first line of `s`, cut to 80 characters ("..." where cut): a failure
// message in a table row or a log line.
std::string FirstLine(const std::string& s);
// What a failure says in one line (a table's status, a summary, a search's
// stop): the message's first line and, where another line says why, that
// one too after " | " (a traceback's last line, the exception; else the
// first line naming an error, a compiler's first error), cut to 160
// characters and made valid UTF-8.
std::string WhyFailed(const std::string& message);

// `parts` separated by `sep`: "a,b,c".
std::string Join(const std::vector<std::string>& parts, std::string_view sep = ",");

// The name of `known` nearest to `name` by edit distance, ignoring case,
// when it is near enough to be a typo of it (fewer edits than a third of
// its letters, plus one), else "": what a "did you mean" names.
std::string NearestName(std::string_view name, const std::vector<std::string>& known);
// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line
// break, quotes doubled; line breaks become spaces, so a row is one line.
std::string CsvField(std::string_view s);
// printf into a string (what the printers' figures are written with).
std::string Fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace tune
