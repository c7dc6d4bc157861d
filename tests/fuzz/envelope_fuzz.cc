// libFuzzer target for the envelope decoder, the first code that touches
// bytes from the network. Beyond "never crash, never leak, no undefined
// behaviour" (the sanitizers' part), it checks that whatever the decoder
// accepts is something the encoder can reproduce: decode(encode(x)) must
// succeed and encode it to the very same bytes, or a relay of a decoded
// message could differ from what was sent.
//
// Framing alone is not the whole door: a custom mutator also decodes a valid
// input, changes one field of it to a hostile value (bytes that are not
// UTF-8, an over-long text, NaN, infinities, negatives, extreme integers)
// and encodes it again, so the fuzzer explores values the decoder must
// refuse or carry through unchanged, not only broken frames. Whatever the
// decoder accepts must hold valid text.
//
// Built and run by tests/fuzz/build_and_run.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cmath>
#include <limits>
#include <random>

#include "protocol/protocol.h"
#include "base/text.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::minstd_rand;

void Hostile(std::string& s, Rng& rng) {
  switch (rng() % 6) {
    case 0: s += "\xff"; break;                      // never valid UTF-8
    case 1: s.insert(0, "\xc3"); break;              // a lead byte without its continuation
    case 2: s = "\xed\xa0\x80"; break;             // a surrogate
    case 3: s.assign(tune::kMaxNameBytes + 1 + rng() % 8, 'x'); break;
    case 4: s.clear(); break;
    default: s += std::string(1, '\0'); break;
  }
}
void Hostile(double& v, Rng& rng) {
  const double values[] = {std::nan(""), -1.0, std::numeric_limits<double>::infinity(), 1e308, 0.0, -0.0, 5e-324};
  v = values[rng() % 7];
}
template <typename T>
  requires std::is_integral_v<T>
void Hostile(T& v, Rng& rng) {
  const T values[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), T(-1)};
  v = values[rng() % 4];
}
void Hostile(tune::NamedValues& nv, Rng& rng) {
  if (nv.empty() || rng() % 3 == 0) {
    nv.emplace_back("X", 7);
    return;
  }
  auto& [name, value] = nv[rng() % nv.size()];
  if (rng() % 2) Hostile(name, rng);
  else Hostile(value, rng);
}

void Hostile(tune::ParamValues& params, Rng& rng) {
  if (params.empty() || rng() % 3 == 0) {
    params.emplace_back("X", rng() % 2 ? tune::ParamValue::String("stream_k") : tune::ParamValue::Bool(true));
    return;
  }
  auto& [name, value] = params[rng() % params.size()];
  if (rng() % 2) {
    Hostile(name, rng);
  } else {
    int64_t n = value.Number();
    Hostile(n, rng);
    value = n;
  }
}

// One field of `m` set to a hostile value.
void MutateMeasurement(tune::Measurement& m, Rng& rng) {
  switch (rng() % 10) {
    case 0: Hostile(m.gpu_model, rng); break;
    case 1: Hostile(m.config_id, rng); break;
    case 2: Hostile(m.median_us, rng); break;
    case 3: Hostile(m.samples, rng); break;
    case 4: Hostile(m.config.params, rng); break;
    case 5: Hostile(m.failure_message, rng); break;
    case 6: Hostile(m.stdev_us, rng); break;
    case 7: Hostile(m.backend, rng); break;
    case 8: m.pass = m.ReplacesScreening() ? tune::Measurement::Pass::kScreen : tune::Measurement::Pass::kConfirm; break;
    default: Hostile(m.worker, rng); break;
  }
}

// One field of the command (or the envelope's sender) set to a hostile value.
void MutateField(tune::Envelope& env, Rng& rng) {
  if (rng() % 8 == 0) return Hostile(env.sender, rng);
  std::visit(
      [&](auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, tune::Hello>) {
          if (c.devices.empty() || rng() % 3 == 0) return Hostile(c.worker_name, rng);
          auto& d = c.devices[rng() % c.devices.size()];
          if (rng() % 2) Hostile(d.model, rng);
          else Hostile(d.index, rng);
        } else if constexpr (std::is_same_v<T, tune::Results>) {
          if (c.measurements.empty() || rng() % 4 == 0) return Hostile(c.sweep_id, rng);
          MutateMeasurement(c.measurements[rng() % c.measurements.size()], rng);
        } else if constexpr (std::is_same_v<T, tune::WorkUnit>) {
          if (rng() % 2 && !c.configs.empty()) return Hostile(c.configs[rng() % c.configs.size()].params, rng);
          Hostile(c.lease_seconds, rng);
        } else if constexpr (std::is_same_v<T, tune::SweepSubmit>) {
          if (rng() % 2 && !c.shapes.empty()) return Hostile(c.shapes[rng() % c.shapes.size()].dims, rng);
          if (rng() % 2 && !c.ops.empty()) return Hostile(c.ops[rng() % c.ops.size()], rng);
          Hostile(c.confirm_seconds, rng);
        } else if constexpr (std::is_same_v<T, tune::RequestWork>) {
          Hostile(c.device_index, rng);
        } else if constexpr (std::is_same_v<T, tune::SweepStatusRequest> || std::is_same_v<T, tune::SweepAccepted> ||
                             std::is_same_v<T, tune::SweepCancel>) {
          Hostile(c.sweep_id, rng);
        } else if constexpr (std::is_same_v<T, tune::StoreRead>) {
          if (rng() % 2) return Hostile(c.filter.op, rng);
          Hostile(c.offset, rng);
        } else if constexpr (std::is_same_v<T, tune::StoreChunk>) {
          if (rng() % 2) return Hostile(c.data, rng);
          Hostile(c.total_bytes, rng);
        } else if constexpr (std::is_same_v<T, tune::Disconnect>) {
          Hostile(c.reason, rng);
        } else if constexpr (std::is_same_v<T, tune::ErrorReply>) {
          Hostile(c.message, rng);
        } else {
          Hostile(env.seq, rng);
        }
      },
      env.command);
}

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
  // Accepted text is valid text, whatever field it sits in (checked here on
  // the fields a peer names itself and its rows by).
  if (!tune::IsValidUtf8(first->sender)) Die("accepted a sender that is not UTF-8", "");
  if (auto* h = std::get_if<tune::Hello>(&first->command)) {
    if (!tune::IsValidUtf8(h->worker_name)) Die("accepted a worker name that is not UTF-8", "");
    for (const auto& d : h->devices)
      if (!tune::IsValidUtf8(d.model)) Die("accepted a model that is not UTF-8", "");
  }
  if (auto* r = std::get_if<tune::Results>(&first->command)) {
    for (const auto& m : r->measurements)
      if (!tune::IsValidUtf8(m.gpu_model) || !tune::IsValidUtf8(m.failure_message) || !tune::IsValidUtf8(m.worker))
        Die("accepted a row whose text is not UTF-8", "");
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

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  auto env = tune::DecodeEnvelope(data, size);
  if (!env.ok() || rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  MutateField(*env, rng);
  const std::string out = tune::EncodeEnvelope(*env);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
