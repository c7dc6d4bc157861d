// Ed25519 keys and signatures (libsodium) for bundles.
//
// The farm signs every bundle it publishes with its secret key; deployments
// hold only public keys and refuse a bundle that no trusted key signed (see
// bundle.h: WriteSignedBundleFiles / ReadVerifiedBundleFile).
//
// Key files are text, one header line then the key in lower-case hex; lines
// starting with '#' and blank lines are ignored (the writers add the key id
// as a comment for people):
//
//   tunefarm-ed25519-secret v1            tunefarm-ed25519-public v1
//   # key id 3f1c2a9b0d4e5f60             # key id 3f1c2a9b0d4e5f60
//   <64 hex digits: the 32-byte seed>     <64 hex digits: the 32-byte key>
//
// The secret file holds the Ed25519 seed (the secret key is derived from it);
// it is created with mode 0600 and refused on load when group or others may
// read or write it, as ssh does.
//
// A key id is the first 8 bytes of BLAKE2b-256(public key), as 16 hex digits.
// It only names a key in files and messages; verification always uses a
// trusted key's full 32 bytes.
//
// Thread safety: every function is safe to call concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tune/status.h"

namespace tune {

inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kSecretSeedBytes = 32;
inline constexpr size_t kSignatureBytes = 64;
inline constexpr size_t kKeyIdBytes = 8;

using Signature = std::array<uint8_t, kSignatureBytes>;

struct PublicKey {
  std::array<uint8_t, kPublicKeyBytes> bytes{};

  // 16 hex digits, see above.
  std::string Id() const;
  std::array<uint8_t, kKeyIdBytes> IdBytes() const;
  bool operator==(const PublicKey&) const = default;
};

// An Ed25519 secret key. Its bytes are wiped when it is destroyed; it can be
// moved but not copied, so that a key loaded once lives in one place.
class SecretKey {
 public:
  // A fresh random key (libsodium's CSPRNG).
  static SecretKey Generate();
  // The key whose seed is `seed` (deterministic; for tests and for keys kept
  // in a secret manager rather than a file).
  static SecretKey FromSeed(const std::array<uint8_t, kSecretSeedBytes>& seed);

  SecretKey(SecretKey&& other) noexcept;
  SecretKey& operator=(SecretKey&& other) noexcept;
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;
  ~SecretKey();

  const PublicKey& public_key() const { return public_; }

  // Detached Ed25519 signature of `message`.
  Signature Sign(std::string_view message) const;

 private:
  friend std::string FormatSecretKey(const SecretKey& key);
  SecretKey() = default;
  std::array<uint8_t, 64> sk_{};  // libsodium's form: seed || public key
  PublicKey public_;
};

// True when `signature` is `key`'s signature of exactly `message`.
bool VerifySignature(const PublicKey& key, std::string_view message, const Signature& signature);

// Key file text (see above), ending in a newline.
std::string FormatPublicKey(const PublicKey& key);
std::string FormatSecretKey(const SecretKey& key);

// Parses public key text: the contents of a public key file, or the bare 64
// hex digits. Errors say what is wrong, without a file name.
Result<PublicKey> ParsePublicKey(std::string_view text);
// Parses secret key file text.
Result<SecretKey> ParseSecretKey(std::string_view text);

// Creates a new key pair: the secret key file (mode 0600) at `secret_path`
// and the public one (mode 0644) at `public_path`. Never replaces an
// existing file: losing a signing key by accident is worse than an error.
// On success returns the public key.
Result<PublicKey> GenerateKeyPairFiles(const std::string& secret_path, const std::string& public_path);

// Loads a key file. Errors are one line that starts with the file's path:
// missing or unreadable file, wrong kind of key file, bad hex, and for secret
// keys a file mode that lets group or others read or write it.
Result<SecretKey> ReadSecretKeyFile(const std::string& path);
Result<PublicKey> ReadPublicKeyFile(const std::string& path);

}  // namespace tune
