// libFuzzer target for the envelope decoder, the first code that touches
// bytes from the network. Beyond "never crash, never leak, no undefined
// behaviour" (the sanitizers' part), it checks that whatever the decoder
// accepts is something the encoder can reproduce: decode(encode(x)) must
// succeed and encode it to the very same bytes, or a relay of a decoded
// message could differ from what was sent.
//
// Built and run by tests/fuzz/build_and_run.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tune/protocol.h"

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "envelope_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto first = tune::DecodeEnvelope(data, size);
  if (!first.ok()) {
    if (first.status().message().empty()) Die("error without a message", "");
    return 0;
  }
  // The command name must be printable for logs whatever arrived.
  if (tune::CommandName(first->command) == nullptr) Die("no command name", "");

  const std::string once = tune::EncodeEnvelope(*first);
  auto second = tune::DecodeEnvelope(once.data(), once.size());
  if (!second.ok()) Die("re-encoded envelope does not decode", second.status().message());
  const std::string twice = tune::EncodeEnvelope(*second);
  if (once != twice) {
    Die("re-encoding is not stable",
        std::to_string(once.size()) + " vs " + std::to_string(twice.size()) + " bytes");
  }
  if (tune::CommandName(second->command) != tune::CommandName(first->command)) {
    Die("command changed in a round trip", tune::CommandName(first->command));
  }

  // ZeroMQ promises no alignment; a frame one byte off must read the same.
  std::vector<uint8_t> shifted(size + 1);
  std::memcpy(shifted.data() + 1, data, size);
  auto misaligned = tune::DecodeEnvelope(shifted.data() + 1, size);
  if (!misaligned.ok()) Die("misaligned copy does not decode", misaligned.status().message());
  if (tune::EncodeEnvelope(*misaligned) != once) Die("misaligned copy decodes differently", "");
  return 0;
}
