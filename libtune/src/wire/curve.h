// CURVE keys for the farm's ZeroMQ links: generating, storing and loading
// key pairs, the coordinator's allow-list of worker keys, and configuring
// sockets to use them.
//
// Keys are Z85 text (40 characters for 32 bytes), the form ZeroMQ's tools
// and bindings exchange. Files follow the ssh convention, so that an
// operator already knows which one to guard:
//
//   <path>       the secret file, mode 0600, holds both keys:
//                  # tunefarm CURVE secret key: worker-a (keep private)
//                  public <z85>
//                  secret <z85>
//   <path>.pub   the public file, safe to copy anywhere:
//                  # tunefarm CURVE public key
//                  <z85> worker-a
//
// A public file is also a valid allow-list line, so the coordinator's
// allow-list can be built with `cat workers/*.pub > allowed_workers`.
//
// CURVE is on by default for every endpoint that leaves the host
// (IsLoopbackEndpoint() says which do not).
//
// Every call returns a Status naming the file (and line) at fault; none
// throws. All functions are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "tune/status.h"

namespace zmq {
class socket_t;
}

namespace tune {

struct CurveKeyPair {
  std::string public_z85;  // 40 Z85 characters
  std::string secret_z85;  // 40 Z85 characters; never log it
};

// One allow-list entry. `name` is the free text after the key ("" if none),
// used in logs only: the key is the identity.
// What an admitted key may do on the coordinator's socket. Workers say
// hello, lease units and send results; clients submit sweeps; builders
// (`worker --compile-only`) say hello, ask for configs to compile and send
// their images. Any may ask for status.
enum class PeerRole { kWorker, kClient, kBuilder };
const char* PeerRoleName(PeerRole r);  // "worker", "client", "builder"

struct AllowedKey {
  std::string public_z85;
  std::string name;
  PeerRole role = PeerRole::kWorker;  // the list it was loaded from
};

// Suffix of the public file written beside a secret key file.
inline constexpr const char* kCurvePublicSuffix = ".pub";

// True when `z85` is a well-formed 40-character Z85 key.
bool IsValidCurveKey(const std::string& z85);

// A fresh key pair from libzmq (libsodium's randomness). Fails only when
// libzmq was built without CURVE.
Result<CurveKeyPair> GenerateCurveKeyPair();

// Writes `secret_path` (mode 0600, both keys) and `secret_path + ".pub"`
// (mode 0644, public key followed by `name`). Refuses to replace existing
// files unless `overwrite`; the secret is never visible with looser
// permissions, even briefly. `name` must be one line.
Status WriteCurveKeyPair(const CurveKeyPair& keys, const std::string& secret_path,
                         const std::string& name, bool overwrite = false);

// Reads a secret file written by WriteCurveKeyPair. Refuses a file that
// group or others may read (like ssh), a malformed key, and a public key
// that does not belong to the secret key.
Result<CurveKeyPair> LoadCurveKeyPair(const std::string& secret_path);

// Reads a public file: the first key of its first non-comment line. A
// secret file is refused (it says so), so that a secret is never passed
// around where a public key was asked for.
Result<std::string> LoadCurvePublicKey(const std::string& path);

// Reads an allow-list: one Z85 public key per line, optionally followed by
// whitespace and a name; blank lines and '#' comments are ignored; a
// repeated key is kept once (first name wins). A malformed line, a secret
// key file, or a list without any key is an error naming file:line.
// Every key gets `role`. For a list that must be right as a whole (at
// start-up); a running coordinator re-reads with ReadCurveAllowList.
Result<std::vector<AllowedKey>> LoadCurveAllowList(const std::string& path, PeerRole role = PeerRole::kWorker);

// An allow-list read line by line: the keys of its good lines, and one
// message per line that is not a key ("curve: FILE:LINE: ...").
struct CurveAllowListRead {
  std::vector<AllowedKey> keys;
  std::vector<std::string> problems;
};
// Reads an allow-list as LoadCurveAllowList does, except that a malformed
// line is skipped and named in `problems` while the other lines count, and
// a file without keys is an empty list (nobody of `role` is admitted).
// Fails only when the file cannot be read at all (missing, unreadable, not
// a regular file, too large), with a message naming it.
Result<CurveAllowListRead> ReadCurveAllowList(const std::string& path, PeerRole role = PeerRole::kWorker);

// True for endpoints that never leave this host: inproc://, ipc://, and tcp
// to 127.0.0.0/8, ::1 or localhost (any port or '*'). Those may run without
// CURVE; everything else (including tcp://*:port and tcp://0.0.0.0:port,
// which listen on every interface) must not.
bool IsLoopbackEndpoint(const std::string& endpoint);

// Socket set-up; call before bind()/connect().
//
// Server side (the coordinator's ROUTER): the socket proves it holds
// `mine.secret_z85`, and asks the ZAP handler of its context (see
// coordinator/zap_authenticator.h) about every client; without a running
// handler libzmq admits any client key, so start the handler first.
Status ConfigureCurveServer(zmq::socket_t& socket, const CurveKeyPair& mine);
// Client side (workers, CLI): encrypts to the server whose public key is
// `server_public_z85` and refuses a server that cannot prove it holds the
// matching secret.
Status ConfigureCurveClient(zmq::socket_t& socket, const CurveKeyPair& mine,
                            const std::string& server_public_z85);

// The ZAP domain the server sockets announce; the authenticator logs it.
inline constexpr const char* kCurveZapDomain = "tunefarm";

}  // namespace tune
