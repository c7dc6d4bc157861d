// The codec stage's shared parts, private to libtune: the discipline every
// decoder follows with bytes it did not write (Budget, ReadFrame), and the
// converters between tune's structs and their schema/records.capnp
// counterparts. Every Cap'n Proto encoding goes through here once: the
// envelope codec (protocol/protocol.cc, with protocol/envelope_parts.h), the stored
// records' codec (store/records.cc) and the bundle codec
// (bundle/bundle.cc). It speaks no transport: the disk formats do not
// depend on ZeroMQ. Generated Cap'n Proto types are seen only here and by
// the files that encode through this stage.
//
// Every frame is treated as hostile: sizes are checked before Cap'n Proto
// sees them, the reader's traversal and nesting limits are tied to the frame
// size (so a small frame cannot make us walk or allocate much more than
// itself), enum and union values outside what this build knows are rejected
// rather than guessed, and every exception is turned into a Status.
//
// Thread safety: free functions over caller-owned values; safe to call from
// any number of threads.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "schema/records.capnp.h"
#include "base/profile.h"
#include "tune/status.h"
#include "base/text.h"
#include "base/types.h"

namespace tune::codec {

// Reading each pointer once costs about one traversal word per message word;
// the slack covers list headers and the few fields read twice, while still
// bounding the work a crafted frame (e.g. many pointers to one far object)
// can cause.
constexpr uint64_t kTraversalWordsPerFrameWord = 4;
constexpr uint64_t kTraversalSlackWords = 1024;
// The deepest legitimate envelope path is Envelope > command > sweepSubmit >
// opPackages > OpPackage > files > OpFile > contents (8); generous headroom
// without letting recursion depth be chosen by the sender.
constexpr int kNestingLimit = 32;

// Thrown inside the decoder for semantic errors; caught at the boundary with
// kj::Exception so that callers only ever see a Status.
struct DecodeError {
  std::string message;
};

[[noreturn]] inline void Fail(std::string message) { throw DecodeError{std::move(message)}; }

// The traversal limit bounds the wire words we read, not what we build from
// them: a list of zero-sized structs costs the sender almost nothing but
// would cost us a whole C++ object per element. Every list is charged its
// C++ size before it is materialised, against a multiple of the frame size
// that honest messages (about 3x) stay well under.
constexpr size_t kDecodedBytesPerFrameByte = 8;
constexpr size_t kDecodedSlackBytes = 1u << 20;

class Budget {
 public:
  // check_text: every Text field must be valid UTF-8 within its bound
  // (base/text.h). On for envelopes, which come from peers; off for stored
  // records, which may predate the check and must still be readable, and
  // for bundles, which the farm wrote.
  Budget(size_t frame_bytes, bool check_text)
      : check_text(check_text), left_(frame_bytes * kDecodedBytesPerFrameByte + kDecodedSlackBytes) {}
  const bool check_text;
  void Charge(size_t count, size_t each) {
    const size_t cost = count * each;  // count < 2^29 (a Cap'n Proto list), each < 4 KiB
    if (cost > left_) Fail("frame decodes to more memory than its size allows");
    left_ -= cost;
  }

 private:
  size_t left_;
};

// ---------------------------------------------------------------------------
// Conversions: Set* fill a builder, Get* read a reader within a budget.

capnp::Text::Reader TextOf(const std::string& s);
capnp::Data::Reader DataOf(const std::string& s);
std::string Str(capnp::Text::Reader t);
// A Text field as read from a frame: refused when the frame's budget checks
// text and `field` is not valid UTF-8 of at most `max_bytes`.
std::string Txt(capnp::Text::Reader t, const Budget& budget, const char* field,
                size_t max_bytes = kMaxNameBytes);
std::string Str(capnp::Data::Reader d);
std::vector<std::string> Strings(capnp::List<capnp::Text>::Reader list, Budget& budget, const char* field);
void SetStrings(capnp::List<capnp::Text>::Builder list, const std::vector<std::string>& v);
wire::FailureClass ToWire(FailureClass c);
FailureClass FromWire(wire::FailureClass c);
wire::ConfirmTiming ToWire(ConfirmTiming t);
ConfirmTiming FromWire(wire::ConfirmTiming t);
void SetNamedValues(capnp::List<wire::NamedValue>::Builder list, const NamedValues& v);
NamedValues GetNamedValues(capnp::List<wire::NamedValue>::Reader list, Budget& budget);
void SetConfig(wire::Config::Builder b, const Config& c);
Config GetConfig(wire::Config::Reader r, Budget& budget);
void SetShape(wire::Shape::Builder b, const Shape& s);
Shape GetShape(wire::Shape::Reader r, Budget& budget);
void SetDevice(wire::DeviceInfo::Builder b, const DeviceInfo& d);
DeviceInfo GetDevice(wire::DeviceInfo::Reader r, const Budget& budget);
void SetMeasurement(wire::Measurement::Builder b, const Measurement& m);
Measurement GetMeasurement(wire::Measurement::Reader r, Budget& budget);
// with_witnesses false: the cubin and its identity only, as a bundle ships
// it. Which workers vouched for an image is the farm's bookkeeping (their
// host names); in a bundle it would make one winner's bytes differ from farm
// to farm.
void SetKernelImage(wire::KernelImage::Builder b, const KernelImage& k, bool with_witnesses = true);
// Decodes; the values are checked by CheckKernelImage where they enter.
KernelImage GetKernelImage(wire::KernelImage::Reader r, Budget& budget);
void SetProfile(wire::KernelProfile::Builder b, const KernelProfile& p);
// Decodes; the values are checked by CheckProfile where they enter.
KernelProfile GetProfile(wire::KernelProfile::Reader r, Budget& budget);

template <typename T, typename R, typename F>
std::vector<T> GetList(R list, Budget& budget, F&& get) {
  budget.Charge(list.size(), sizeof(T));
  std::vector<T> out;
  out.reserve(list.size());
  for (auto item : list) out.push_back(get(item));
  return out;
}

template <typename B, typename T, typename F>
void SetList(B list, const std::vector<T>& v, F&& set) {
  for (size_t i = 0; i < v.size(); ++i) set(list[i], v[i]);
}

// ---------------------------------------------------------------------------
// Framing.

std::string ToBytes(capnp::MessageBuilder& builder);

// What a reader accepts. `what` names the record in error messages (and
// prefixes them); `max_bytes` bounds the frame; `check_text` as in Budget;
// `nesting_limit` bounds how deep the sender may make us recurse.
struct FrameRules {
  const char* what;
  size_t max_bytes;
  bool check_text;
  int nesting_limit = kNestingLimit;
};

// Runs `fn(reader, budget)` over a frame with every hostile-input check
// applied. Returns fn's result, or a kCorruption "<what>: ..." for a frame that is
// empty, too large, not whole words, malformed, followed by trailing bytes,
// or that decodes to more than its size allows; never throws.
template <typename T, typename Fn>
Result<T> ReadFrame(const void* data, size_t size, const FrameRules& rules, Fn&& fn) {
  const char* what = rules.what;
  if (data == nullptr && size != 0) return Status::Corruption(std::string(what) + ": null buffer");
  if (size == 0) return Status::Corruption(std::string(what) + ": empty frame");
  if (size > rules.max_bytes) {
    return Status::Corruption(std::string(what) + ": frame of " + std::to_string(size) +
                         " bytes exceeds the limit of " + std::to_string(rules.max_bytes));
  }
  if (size % sizeof(capnp::word) != 0) {
    return Status::Corruption(std::string(what) + ": frame size " + std::to_string(size) +
                         " is not a multiple of 8 bytes");
  }
  const size_t words = size / sizeof(capnp::word);
  try {
    // Cap'n Proto reads words in place and requires word alignment; neither
    // ZeroMQ nor a caller's buffer promises it, so misaligned frames are copied.
    kj::Array<capnp::word> copy;
    kj::ArrayPtr<const capnp::word> view;
    if (reinterpret_cast<uintptr_t>(data) % alignof(capnp::word) == 0) {
      view = kj::arrayPtr(static_cast<const capnp::word*>(data), words);
    } else {
      copy = kj::heapArray<capnp::word>(words);
      std::memcpy(copy.begin(), data, size);
      view = copy.asPtr();
    }
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words * kTraversalWordsPerFrameWord + kTraversalSlackWords;
    options.nestingLimit = rules.nesting_limit;
    capnp::FlatArrayMessageReader reader(view, options);
    // One record per frame: trailing bytes mean a framing bug or tampering.
    if (reader.getEnd() != view.end()) {
      return Status::Corruption(std::string(what) + ": " +
                           std::to_string((view.end() - reader.getEnd()) * sizeof(capnp::word)) +
                           " trailing bytes after the message");
    }
    Budget budget(size, rules.check_text);
    return fn(reader, budget);
  } catch (const DecodeError& e) {
    return Status::Corruption(std::string(what) + ": " + e.message);
  } catch (const kj::Exception& e) {
    return Status::Corruption(std::string(what) + ": malformed frame: " +
                         std::string(e.getDescription().cStr()));
  } catch (const std::bad_alloc&) {
    return Status::Corruption(std::string(what) + ": malformed frame: out of memory while decoding");
  } catch (const std::exception& e) {
    return Status::Corruption(std::string(what) + ": malformed frame: " + e.what());
  }
}

// Cap'n Proto's default first segment is 1024 words, allocated and zeroed for
// every message; most of ours (acks, heartbeats, stored rows) fit in 128, and
// larger ones grow by further segments.
constexpr unsigned kFirstSegmentWords = 128;

}  // namespace tune::codec
