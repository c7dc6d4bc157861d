// The coordinator's gatekeeper: a ZAP handler (ZeroMQ RFC 27) that admits a
// CURVE client only when its public key is on the allow-list of worker keys,
// on that of client keys or on that of builder keys. The list a key is on is its role (PeerRole):
// the coordinator asks RoleOf() for every message, so a client key cannot
// lease work or send results, a worker key cannot submit, a builder key can
// only ask for configs to compile and send their images, and a key taken off
// a list (and reloaded) loses its live connection with its next message.
//
// libzmq asks the ZAP handler of a socket's context about every CURVE
// handshake; with no handler bound it admits *any* key. So:
//
//   zmq::context_t ctx;
//   auto allowed = LoadCurveAllowList(path);              // wire/curve.h
//   ZapAuthenticator zap(ctx, *allowed, {.allow_list_path = path});
//   TUNE_RETURN_IF_ERROR(zap.Start());                     // before bind()
//   auto router = Link::Router(ctx, &server_keys);         // wire/link.h
//   TUNE_RETURN_IF_ERROR((*router)->Bind(endpoint));
//   ...
//   router->reset();                                       // before Stop()
//   zap.Stop();
//
// An admitted connection's messages carry the client's Z85 public key as
// their "User-Id" property and its allow-list name, when it has one, as
// "Key-Name": AdmittedKey() reads the first, so the coordinator can tie a
// worker to the key it proved it holds, and fail closed by dropping any
// message on a CURVE socket whose AdmittedKey() is empty.
//
// Refusals are logged with the key and peer address, at most once a minute
// per key (a refused peer reconnects every few hundred milliseconds).
// Mechanisms other than CURVE are refused.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wire/curve.h"
#include "tune/status.h"

namespace zmq {
class context_t;
class message_t;
}

namespace tune {

struct ZapAuthenticatorOptions {
  // When set, this allow-list file is re-read whenever it changes (checked
  // every `reload_check_seconds`) and on Reload(). A re-read fails closed:
  // the list in force becomes the keys the files hold now, whatever else
  // they hold (see Reload()).
  std::string allow_list_path;
  // Optional: the client keys (PeerRole::kClient), watched likewise. Keys of
  // allow_list_path are workers.
  std::string client_allow_list_path;
  // Optional: the builder keys (PeerRole::kBuilder), watched likewise.
  std::string builder_allow_list_path;
  double reload_check_seconds = 2.0;
  // Receives one line per decision worth logging; default: stderr, "zap: ".
  // Called from the handler thread and from Reload()'s caller, so it must be
  // thread-safe.
  std::function<void(const std::string&)> log;
  // Log admissions too, not only refusals.
  bool log_accepted = true;
};

class ZapAuthenticator {
 public:
  // `ctx` must outlive this object. `allowed` may be empty (nobody gets in).
  ZapAuthenticator(zmq::context_t& ctx, std::vector<AllowedKey> allowed,
                   ZapAuthenticatorOptions options = {});
  // Loads `allow_list_path` and watches it for changes.
  static Result<std::unique_ptr<ZapAuthenticator>> FromFile(zmq::context_t& ctx,
                                                             const std::string& allow_list_path,
                                                             ZapAuthenticatorOptions options = {});
  ~ZapAuthenticator();  // Stop()s
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  // Binds the context's ZAP endpoint and starts answering on a thread of
  // its own. Fails if already started or if another handler holds the
  // endpoint in this context.
  Status Start();
  // Stops answering and unbinds. Close the CURVE server sockets first: from
  // here on libzmq would admit any client key. Idempotent.
  void Stop();

  // Re-reads the allow-list files now and puts what they hold in force, for
  // the next handshake and the next RoleOf(): an empty file admits nobody of
  // its role; a malformed line is skipped (logged with file and line) and
  // the rest applied; a file that cannot be read counts as empty (logged),
  // and so does one that is not a regular file (a FIFO, a device, a
  // folder), which is refused without waiting on it;
  // a key on two lists is admitted as none of them. Returns OK when nothing was
  // skipped, else the first problem (the list is in force all the same).
  Status Reload();
  // The role of `key` under the list in force; nullopt when it is on none
  // (never admitted, or revoked since).
  std::optional<PeerRole> RoleOf(const std::string& key) const;

  size_t allowed_count() const;
  uint64_t accepted() const;  // handshakes admitted since construction
  uint64_t refused() const;   // handshakes refused since construction

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The Z85 public key this handler admitted the sender of `msg` with, or ""
// when its connection was never checked by it (plaintext, or no handler was
// running at handshake time). Use the payload frame: a ROUTER's identity
// frame carries no properties.
std::string AdmittedKey(const zmq::message_t& msg);

}  // namespace tune
