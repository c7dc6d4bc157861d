#include "wire/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <zmq.hpp>

namespace tune {
namespace {

constexpr size_t kZ85KeyChars = 40;
// Key and allow-list files are a few lines; anything this large is the
// wrong file, and reading it whole would only hide that.
constexpr std::streamoff kMaxKeyFileBytes = 4 << 20;

constexpr const char kZ85Alphabet[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

std::string Errno(const std::string& what, const std::string& path) {
  return "curve: " + what + " " + path + ": " + std::strerror(errno);
}

// Public keys may be quoted back to the operator; anything else read from a
// file is cut short so a stray secret cannot end up whole in a log.
std::string Excerpt(const std::string& s) {
  return s.size() <= 12 ? s : s.substr(0, 8) + "...";
}

std::vector<std::string> Tokens(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// Everything after the first token, trimmed: the free-text name of a key.
std::string Rest(const std::string& line, const std::string& first) {
  size_t pos = line.find(first);
  pos = pos == std::string::npos ? line.size() : pos + first.size();
  const size_t b = line.find_first_not_of(" \t\r", pos);
  if (b == std::string::npos) return "";
  const size_t e = line.find_last_not_of(" \t\r");
  return line.substr(b, e - b + 1);
}

// A line is a comment when it starts with '#' and is not a key: '#' is a
// Z85 digit, so a key may itself begin with one.
bool IsCommentOrBlank(const std::vector<std::string>& tokens) {
  return tokens.empty() || (tokens[0][0] == '#' && !IsValidCurveKey(tokens[0]));
}

struct Line {
  int number;
  std::string text;
};

struct TextFile {
  mode_t mode = 0;
  std::vector<Line> lines;
};

// Reads a small text file as lines. A running coordinator re-reads its
// allow-lists on its ZAP thread, so nothing here may block for good: the
// file is opened without waiting (O_NONBLOCK: a FIFO with no writer, a
// device, would otherwise hold open() forever and with it every handshake)
// and must then be a regular file, read to at most kMaxKeyFileBytes. It is
// looked at before it is opened too, so that a device is not even opened.
// A link is followed: deployments link lists into place.
Result<TextFile> ReadLines(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status::Error("curve: " + path + " is not a regular file");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return Status::Error(Errno("cannot open", path));
  if (::fstat(fd, &st) != 0) {
    Status s = Status::Error(Errno("cannot stat", path));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error("curve: " + path + " is not a regular file");
  }
  if (st.st_size > kMaxKeyFileBytes) {
    ::close(fd);
    return Status::Error("curve: " + path + " is " + std::to_string(st.st_size) +
                         " bytes, too large for a key file");
  }
  // Read to the end, to one byte past the limit whatever the size said: a
  // file that grows meanwhile is still read to a bound.
  std::string data;
  char buf[4096];
  while (data.size() <= static_cast<size_t>(kMaxKeyFileBytes)) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = Status::Error(Errno("cannot read", path));
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (data.size() > static_cast<size_t>(kMaxKeyFileBytes)) {
    return Status::Error("curve: " + path + " is more than " + std::to_string(kMaxKeyFileBytes) +
                         " bytes, too large for a key file");
  }

  TextFile file;
  file.mode = st.st_mode & 07777;
  std::istringstream in(data);
  int number = 0;
  for (std::string text; std::getline(in, text);) file.lines.push_back({++number, text});
  return file;
}

std::string At(const std::string& path, int line) {
  return "curve: " + path + ":" + std::to_string(line) + ": ";
}

bool LooksLikeSecretFile(const std::vector<std::string>& tokens) {
  return !tokens.empty() && (tokens[0] == "secret" || tokens[0] == "public");
}

// Writes `contents` to `path` with `mode`, via a temporary file in the same
// directory so that a reader never sees half a key; link() refuses to
// replace an existing file atomically, rename() replaces it atomically.
Status WriteKeyFile(const std::string& path, const std::string& contents, mode_t mode,
                    bool overwrite) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Status::Error(Errno("cannot create", tmp));
  // The umask may only have narrowed the mode; make it exact.
  bool ok = ::fchmod(fd, mode) == 0;
  size_t done = 0;
  while (ok && done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ok = false;
    else done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    errno = saved;
    return Status::Error(Errno("cannot write", tmp));
  }
  if (overwrite) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      Status s = Status::Error(Errno("cannot write", path));
      ::unlink(tmp.c_str());
      return s;
    }
    return Status::OK();
  }
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    Status s = errno == EEXIST
                   ? Status::Error("curve: " + path + " already exists; not replacing a key")
                   : Status::Error(Errno("cannot write", path));
    ::unlink(tmp.c_str());
    return s;
  }
  ::unlink(tmp.c_str());
  return Status::OK();
}

Status RequireCurve() {
  if (!zmq_has("curve")) return Status::Error("curve: this libzmq was built without CURVE support");
  return Status::OK();
}

}  // namespace

bool IsValidCurveKey(const std::string& z85) {
  if (z85.size() != kZ85KeyChars) return false;
  for (char c : z85) {
    if (c == '\0' || std::strchr(kZ85Alphabet, c) == nullptr) return false;
  }
  uint8_t bin[32];
  return zmq_z85_decode(bin, z85.c_str()) != nullptr;
}

Result<CurveKeyPair> GenerateCurveKeyPair() {
  TUNE_RETURN_IF_ERROR(RequireCurve());
  char pub[kZ85KeyChars + 1] = {};
  char sec[kZ85KeyChars + 1] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return Status::Error(std::string("curve: cannot generate a key pair: ") +
                         zmq_strerror(zmq_errno()));
  }
  CurveKeyPair keys{pub, sec};
  ::explicit_bzero(sec, sizeof sec);
  return keys;
}

Status WriteCurveKeyPair(const CurveKeyPair& keys, const std::string& secret_path,
                         const std::string& name, bool overwrite) {
  if (!IsValidCurveKey(keys.public_z85) || !IsValidCurveKey(keys.secret_z85)) {
    return Status::Error("curve: refusing to write " + secret_path + ": malformed key pair");
  }
  if (name.find_first_of("\r\n") != std::string::npos) {
    return Status::Error("curve: key name must be a single line");
  }
  const std::string public_path = secret_path + kCurvePublicSuffix;
  if (!overwrite) {
    // Checked up front so that a refusal leaves neither file half-replaced.
    for (const std::string& p : {secret_path, public_path}) {
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0) {
        return Status::Error("curve: " + p + " already exists; not replacing a key");
      }
    }
  }
  const std::string label = name.empty() ? "" : ": " + name;
  TUNE_RETURN_IF_ERROR(WriteKeyFile(secret_path,
                                    "# tunefarm CURVE secret key" + label + " (keep private)\n"
                                    "public " + keys.public_z85 + "\n"
                                    "secret " + keys.secret_z85 + "\n",
                                    0600, overwrite));
  return WriteKeyFile(public_path,
                      "# tunefarm CURVE public key" + label + "\n" + keys.public_z85 +
                          (name.empty() ? "" : " " + name) + "\n",
                      0644, overwrite);
}

Result<CurveKeyPair> LoadCurveKeyPair(const std::string& secret_path) {
  TUNE_RETURN_IF_ERROR(RequireCurve());
  auto file = ReadLines(secret_path);
  if (!file.ok()) return file.status();

  CurveKeyPair keys;
  for (const Line& line : file->lines) {
    const auto tokens = Tokens(line.text);
    if (IsCommentOrBlank(tokens)) continue;
    if (tokens.size() != 2 || (tokens[0] != "public" && tokens[0] != "secret")) {
      if (tokens.size() >= 1 && IsValidCurveKey(tokens[0])) {
        return Status::Error(At(secret_path, line.number) +
                             "this is a public key file; a secret key file is needed "
                             "(the one without '.pub', from 'tunefarm keygen')");
      }
      return Status::Error(At(secret_path, line.number) +
                           "expected 'public <z85>' or 'secret <z85>'");
    }
    std::string& slot = tokens[0] == "public" ? keys.public_z85 : keys.secret_z85;
    if (!slot.empty()) {
      return Status::Error(At(secret_path, line.number) + "second '" + tokens[0] + "' line");
    }
    if (!IsValidCurveKey(tokens[1])) {
      return Status::Error(At(secret_path, line.number) + "the " + tokens[0] +
                           " key is not a 40-character Z85 key");
    }
    slot = tokens[1];
  }
  if (keys.secret_z85.empty()) {
    return Status::Error("curve: " + secret_path + ": no 'secret <z85>' line");
  }
  // Checked once the file is known to hold a secret, so that a wrong file
  // gets the more useful message above.
  if (file->mode & 077) {
    char mode[16];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(file->mode));
    return Status::Error("curve: " + secret_path + " holds a secret key but is accessible by " +
                         "group or others (mode " + mode + "); run: chmod 600 " + secret_path);
  }
  char derived[kZ85KeyChars + 1] = {};
  if (zmq_curve_public(derived, keys.secret_z85.c_str()) != 0) {
    return Status::Error("curve: " + secret_path + ": cannot derive the public key: " +
                         zmq_strerror(zmq_errno()));
  }
  if (keys.public_z85.empty()) {
    keys.public_z85 = derived;
  } else if (keys.public_z85 != derived) {
    return Status::Error("curve: " + secret_path +
                         ": the public key does not belong to the secret key");
  }
  return keys;
}

Result<std::string> LoadCurvePublicKey(const std::string& path) {
  auto file = ReadLines(path);
  if (!file.ok()) return file.status();
  for (const Line& line : file->lines) {
    const auto tokens = Tokens(line.text);
    if (IsCommentOrBlank(tokens)) continue;
    if (LooksLikeSecretFile(tokens)) {
      return Status::Error(At(path, line.number) + "this is a secret key file; give the public one (" +
                           path + kCurvePublicSuffix + ")");
    }
    if (!IsValidCurveKey(tokens[0])) {
      return Status::Error(At(path, line.number) + "'" + Excerpt(tokens[0]) +
                           "' is not a 40-character Z85 public key");
    }
    return tokens[0];
  }
  return Status::Error("curve: " + path + ": no public key in the file");
}

const char* PeerRoleName(PeerRole r) {
  switch (r) {
    case PeerRole::kClient: return "client";
    case PeerRole::kBuilder: return "builder";
    case PeerRole::kWorker: break;
  }
  return "worker";
}

Result<CurveAllowListRead> ReadCurveAllowList(const std::string& path, PeerRole role) {
  auto file = ReadLines(path);
  if (!file.ok()) return file.status();
  CurveAllowListRead read;
  std::set<std::string> seen;
  for (const Line& line : file->lines) {
    const auto tokens = Tokens(line.text);
    if (IsCommentOrBlank(tokens)) continue;
    if (LooksLikeSecretFile(tokens)) {
      read.problems.push_back(At(path, line.number) +
                              "a secret key file does not belong in an allow-list; use the '" +
                              kCurvePublicSuffix + "' file");
      continue;
    }
    if (!IsValidCurveKey(tokens[0])) {
      read.problems.push_back(At(path, line.number) + "'" + Excerpt(tokens[0]) +
                              "' is not a 40-character Z85 public key");
      continue;
    }
    if (seen.insert(tokens[0]).second) read.keys.push_back({tokens[0], Rest(line.text, tokens[0]), role});
  }
  return read;
}

Result<std::vector<AllowedKey>> LoadCurveAllowList(const std::string& path, PeerRole role) {
  auto read = ReadCurveAllowList(path, role);
  if (!read.ok()) return read.status();
  if (!read->problems.empty()) return Status::Error(read->problems.front());
  if (read->keys.empty()) {
    return Status::Error("curve: allow-list " + path + " has no keys: no " + PeerRoleName(role) +
                         " could connect");
  }
  return std::move(read->keys);
}

bool IsLoopbackEndpoint(const std::string& endpoint) {
  auto starts = [&](const char* p) { return endpoint.rfind(p, 0) == 0; };
  if (starts("inproc://") || starts("ipc://")) return true;
  if (!starts("tcp://")) return false;
  std::string addr = endpoint.substr(6);
  // "tcp://source;destination:port": the peer is the destination.
  if (const size_t semi = addr.rfind(';'); semi != std::string::npos) addr = addr.substr(semi + 1);
  std::string host;
  if (!addr.empty() && addr[0] == '[') {
    const size_t close = addr.find(']');
    if (close == std::string::npos) return false;
    host = addr.substr(1, close - 1);
  } else {
    const size_t colon = addr.rfind(':');
    if (colon == std::string::npos) return false;
    host = addr.substr(0, colon);
  }
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (host == "localhost" || host == "lo" || host == "::1" || host == "0:0:0:0:0:0:0:1") {
    return true;
  }
  // 127.0.0.0/8, written as a full dotted quad.
  unsigned a, b, c, d;
  char tail;
  if (std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4) {
    return a == 127 && b < 256 && c < 256 && d < 256;
  }
  return false;
}

Status ConfigureCurveServer(zmq::socket_t& socket, const CurveKeyPair& mine) {
  TUNE_RETURN_IF_ERROR(RequireCurve());
  if (!IsValidCurveKey(mine.secret_z85)) return Status::Error("curve: malformed server secret key");
  try {
    socket.set(zmq::sockopt::curve_server, true);
    socket.set(zmq::sockopt::curve_secretkey, mine.secret_z85);
    socket.set(zmq::sockopt::zap_domain, kCurveZapDomain);
  } catch (const zmq::error_t& e) {
    return Status::Error(std::string("curve: cannot configure the server socket: ") + e.what());
  }
  return Status::OK();
}

Status ConfigureCurveClient(zmq::socket_t& socket, const CurveKeyPair& mine,
                            const std::string& server_public_z85) {
  TUNE_RETURN_IF_ERROR(RequireCurve());
  if (!IsValidCurveKey(mine.public_z85) || !IsValidCurveKey(mine.secret_z85)) {
    return Status::Error("curve: malformed client key pair");
  }
  if (!IsValidCurveKey(server_public_z85)) {
    return Status::Error("curve: malformed server public key '" + Excerpt(server_public_z85) + "'");
  }
  try {
    socket.set(zmq::sockopt::curve_serverkey, server_public_z85);
    socket.set(zmq::sockopt::curve_publickey, mine.public_z85);
    socket.set(zmq::sockopt::curve_secretkey, mine.secret_z85);
  } catch (const zmq::error_t& e) {
    return Status::Error(std::string("curve: cannot configure the client socket: ") + e.what());
  }
  return Status::OK();
}

}  // namespace tune
