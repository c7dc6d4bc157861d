// Ed25519 keys, key files and signatures, on libsodium.
#include "bundle/signing.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace tune {
namespace {

constexpr std::string_view kSecretHeader = "tunefarm-ed25519-secret";
constexpr std::string_view kPublicHeader = "tunefarm-ed25519-public";
constexpr std::string_view kKeyFileVersion = "v1";
// Key files are a few lines; anything larger is not one, and must not make
// a deployment read a huge file at start-up.
constexpr off_t kMaxKeyFileBytes = 16 << 10;

static_assert(kPublicKeyBytes == crypto_sign_PUBLICKEYBYTES);
static_assert(kSecretSeedBytes == crypto_sign_SEEDBYTES);
static_assert(kSignatureBytes == crypto_sign_BYTES);
static_assert(sizeof(std::array<uint8_t, 64>) == crypto_sign_SECRETKEYBYTES);

// sodium_init() must run before the CSPRNG is used; it is idempotent and
// thread-safe, and a function-local static runs it once.
void EnsureSodium() {
  static const int kInit = sodium_init();
  (void)kInit;
}

std::string Hex(const uint8_t* data, size_t n) {
  std::string out(n * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), data, n);
  out.pop_back();
  return out;
}

std::string_view Trim(std::string_view s) {
  const char* kSpace = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// Strict: exactly 2*N hex digits, nothing else.
bool DecodeHex(std::string_view hex, uint8_t* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_hex2bin(out, n, hex.data(), hex.size(), nullptr, &len, &end) != 0) return false;
  return len == n && end == hex.data() + hex.size();
}

// The meaningful lines of a key file: no blanks, no '#' comments.
std::vector<std::string_view> KeyLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = Trim(text.substr(0, nl));
    if (!line.empty() && line.front() != '#') lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

// Checks the header and returns the hex line.
Result<std::string> KeyHex(std::string_view text, std::string_view want, std::string_view other,
                           const char* kind) {
  const std::vector<std::string_view> lines = KeyLines(text);
  if (lines.empty()) return Status::Error(std::string("empty ") + kind + " key file");
  const std::string_view header = lines[0];
  const size_t space = header.find(' ');
  const std::string_view magic = header.substr(0, space);
  const std::string_view version =
      space == std::string_view::npos ? std::string_view() : Trim(header.substr(space + 1));
  if (magic == other) {
    return Status::Error(std::string("holds a ") + (kind[0] == 's' ? "public" : "secret") +
                         " key, not a " + kind + " key");
  }
  if (magic != want) {
    return Status::Error(std::string("not a tunefarm ") + kind + " key file (the first line must be \"" +
                         std::string(want) + " " + std::string(kKeyFileVersion) + "\")");
  }
  if (version != kKeyFileVersion) {
    return Status::Error("key file version \"" + std::string(version) +
                         "\" is not one this libtune reads (" + std::string(kKeyFileVersion) + ")");
  }
  if (lines.size() < 2) return Status::Error("no key after the header line");
  if (lines.size() > 2) return Status::Error("unexpected text after the key");
  return std::string(lines[1]);
}

Status ReadSmallFile(const std::string& path, bool secret, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(path + ": not a regular file");
  }
  // Checked on the open descriptor, so the file cannot change in between.
  if (secret && (st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::Error(path + ": permissions " + mode +
                         " let others read or change a secret key; run chmod 600 " + path);
  }
  if (st.st_size > kMaxKeyFileBytes) {
    ::close(fd);
    return Status::Error(path + ": " + std::to_string(st.st_size) +
                         " bytes is too large for a key file");
  }
  out->assign(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out->size()) {
    const ssize_t n = ::read(fd, out->data() + got, out->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::Error(path + ": read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  ::close(fd);
  return Status::OK();
}

// Creates `path` with `mode`, failing if it exists.
Status WriteNewFile(const std::string& path, const std::string& bytes, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return Status::Error(path + ": already exists; refusing to replace a key file");
    return Status::Error(path + ": cannot create: " + std::strerror(errno));
  }
  // The umask may only have removed bits; this pins the mode we promise.
  Status st;
  if (::fchmod(fd, mode) != 0) st = Status::Error(path + ": cannot set mode: " + std::strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (st.ok() && left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = Status::Error(path + ": write failed: " + std::strerror(errno));
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (st.ok() && ::fsync(fd) != 0) st = Status::Error(path + ": cannot flush: " + std::strerror(errno));
  if (::close(fd) != 0 && st.ok()) st = Status::Error(path + ": cannot close: " + std::strerror(errno));
  if (!st.ok()) ::unlink(path.c_str());
  return st;
}

void Wipe(std::string* s) {
  if (!s->empty()) sodium_memzero(s->data(), s->size());
}

}  // namespace

std::array<uint8_t, kKeyIdBytes> PublicKey::IdBytes() const {
  EnsureSodium();
  uint8_t digest[32];
  crypto_generichash(digest, sizeof digest, bytes.data(), bytes.size(), nullptr, 0);
  std::array<uint8_t, kKeyIdBytes> id;
  std::memcpy(id.data(), digest, id.size());
  return id;
}

std::string PublicKey::Id() const {
  const auto id = IdBytes();
  return Hex(id.data(), id.size());
}

SecretKey SecretKey::Generate() {
  EnsureSodium();
  std::array<uint8_t, kSecretSeedBytes> seed;
  randombytes_buf(seed.data(), seed.size());
  SecretKey key = FromSeed(seed);
  sodium_memzero(seed.data(), seed.size());
  return key;
}

SecretKey SecretKey::FromSeed(const std::array<uint8_t, kSecretSeedBytes>& seed) {
  EnsureSodium();
  SecretKey key;
  crypto_sign_seed_keypair(key.public_.bytes.data(), key.sk_.data(), seed.data());
  return key;
}

SecretKey::SecretKey(SecretKey&& other) noexcept : sk_(other.sk_), public_(other.public_) {
  sodium_memzero(other.sk_.data(), other.sk_.size());
}

SecretKey& SecretKey::operator=(SecretKey&& other) noexcept {
  if (this != &other) {
    sk_ = other.sk_;
    public_ = other.public_;
    sodium_memzero(other.sk_.data(), other.sk_.size());
  }
  return *this;
}

SecretKey::~SecretKey() { sodium_memzero(sk_.data(), sk_.size()); }

Signature SecretKey::Sign(std::string_view message) const {
  EnsureSodium();
  Signature sig;
  crypto_sign_detached(sig.data(), nullptr, reinterpret_cast<const uint8_t*>(message.data()),
                       message.size(), sk_.data());
  return sig;
}

bool VerifySignature(const PublicKey& key, std::string_view message, const Signature& signature) {
  EnsureSodium();
  return crypto_sign_verify_detached(signature.data(), reinterpret_cast<const uint8_t*>(message.data()),
                                     message.size(), key.bytes.data()) == 0;
}

std::string FormatPublicKey(const PublicKey& key) {
  return std::string(kPublicHeader) + " " + std::string(kKeyFileVersion) + "\n# key id " + key.Id() +
         "\n" + Hex(key.bytes.data(), key.bytes.size()) + "\n";
}

std::string FormatSecretKey(const SecretKey& key) {
  // libsodium's secret key starts with the seed.
  std::string out = std::string(kSecretHeader) + " " + std::string(kKeyFileVersion) + "\n# key id " +
                    key.public_key().Id() + "; keep this file private\n";
  // Written in place: no temporary copy of the secret is left in freed memory.
  const size_t at = out.size();
  out.resize(at + 2 * kSecretSeedBytes + 1);
  sodium_bin2hex(out.data() + at, 2 * kSecretSeedBytes + 1, key.sk_.data(), kSecretSeedBytes);
  out.back() = '\n';
  return out;
}

Result<PublicKey> ParsePublicKey(std::string_view text) {
  PublicKey key;
  const std::string_view bare = Trim(text);
  if (bare.size() == 2 * kPublicKeyBytes && DecodeHex(bare, key.bytes.data(), key.bytes.size())) return key;
  Result<std::string> hex = KeyHex(text, kPublicHeader, kSecretHeader, "public");
  if (!hex.ok()) return hex.status();
  if (!DecodeHex(*hex, key.bytes.data(), key.bytes.size())) {
    return Status::Error("the public key must be " + std::to_string(2 * kPublicKeyBytes) + " hex digits");
  }
  return key;
}

Result<SecretKey> ParseSecretKey(std::string_view text) {
  Result<std::string> hex = KeyHex(text, kSecretHeader, kPublicHeader, "secret");
  if (!hex.ok()) return hex.status();
  std::array<uint8_t, kSecretSeedBytes> seed;
  const bool good = DecodeHex(*hex, seed.data(), seed.size());
  Wipe(&hex.value());
  if (!good) {
    sodium_memzero(seed.data(), seed.size());
    return Status::Error("the secret key must be " + std::to_string(2 * kSecretSeedBytes) + " hex digits");
  }
  SecretKey key = SecretKey::FromSeed(seed);
  sodium_memzero(seed.data(), seed.size());
  return key;
}

Result<PublicKey> GenerateKeyPairFiles(const std::string& secret_path, const std::string& public_path) {
  struct stat st;
  // Checked up front so that a clash on the public file does not leave a
  // lone new secret key behind.
  for (const std::string* p : {&secret_path, &public_path}) {
    if (::lstat(p->c_str(), &st) == 0) return Status::Error(*p + ": already exists; refusing to replace a key file");
  }
  SecretKey key = SecretKey::Generate();
  std::string secret_text = FormatSecretKey(key);
  Status s = WriteNewFile(secret_path, secret_text, 0600);
  Wipe(&secret_text);
  if (!s.ok()) return s;
  s = WriteNewFile(public_path, FormatPublicKey(key.public_key()), 0644);
  if (!s.ok()) {
    ::unlink(secret_path.c_str());
    return s;
  }
  return key.public_key();
}

Result<SecretKey> ReadSecretKeyFile(const std::string& path) {
  std::string text;
  TUNE_RETURN_IF_ERROR(ReadSmallFile(path, /*secret=*/true, &text));
  Result<SecretKey> key = ParseSecretKey(text);
  Wipe(&text);
  if (!key.ok()) return Status::Error(path + ": " + key.status().message());
  return key;
}

Result<PublicKey> ReadPublicKeyFile(const std::string& path) {
  std::string text;
  TUNE_RETURN_IF_ERROR(ReadSmallFile(path, /*secret=*/false, &text));
  Result<PublicKey> key = ParsePublicKey(text);
  if (!key.ok()) return Status::Error(path + ": " + key.status().message());
  return key;
}

}  // namespace tune
