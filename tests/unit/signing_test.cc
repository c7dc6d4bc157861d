// Ed25519 keys, key files, and signed bundle files.
#include "bundle/signing.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/temp_dir.h"
#include "bundle/bundle.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

using tune::testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spit(const std::string& path, const std::string& bytes, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ::chmod(path.c_str(), mode);
}

SecretKey KeyFromByte(uint8_t b) {
  std::array<uint8_t, kSecretSeedBytes> seed{};
  seed.fill(b);
  return SecretKey::FromSeed(seed);
}

Bundle SmallBundle() {
  Bundle b;
  b.name = "signed";
  b.farm_version = "0.1.0";
  b.created_unix = 1763740000;
  b.defaults["gemm"] = Config{{{"BM", 128}, {"BN", 128}}};
  BundleEntry e;
  e.op = "gemm";
  e.dtype = "f16";
  e.gpu_model = "h100-80gb-hbm3";
  e.shape.dims = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  e.config.params = {{"BM", 256}, {"BN", 128}};
  e.config_id = "abc";
  e.median_us = 812.5;
  e.backend = "sim";
  b.entries = {e};
  return b;
}

#define EXPECT_ERROR_HAS(result, text)                                                      \
  do {                                                                                      \
    ASSERT_FALSE((result).ok());                                                            \
    EXPECT_NE((result).status().message().find(text), std::string::npos)                    \
        << "missing \"" << (text) << "\" in: " << (result).status().message();              \
  } while (0)

TEST(SigningTest, SignAndVerify) {
  const SecretKey key = KeyFromByte(1);
  const Signature sig = key.Sign("the message");
  EXPECT_TRUE(VerifySignature(key.public_key(), "the message", sig));
  EXPECT_FALSE(VerifySignature(key.public_key(), "the messagf", sig));
  EXPECT_FALSE(VerifySignature(key.public_key(), "the message ", sig));
  EXPECT_FALSE(VerifySignature(KeyFromByte(2).public_key(), "the message", sig));
  Signature bad = sig;
  bad[10] ^= 0x20;
  EXPECT_FALSE(VerifySignature(key.public_key(), "the message", bad));
  EXPECT_TRUE(VerifySignature(key.public_key(), "", key.Sign("")));
}

TEST(SigningTest, KeysAreDeterministicFromSeedAndRandomOtherwise) {
  EXPECT_EQ(KeyFromByte(7).public_key(), KeyFromByte(7).public_key());
  EXPECT_NE(KeyFromByte(7).public_key(), KeyFromByte(8).public_key());
  EXPECT_NE(SecretKey::Generate().public_key(), SecretKey::Generate().public_key());
  const std::string id = KeyFromByte(7).public_key().Id();
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(id, KeyFromByte(8).public_key().Id());
}

TEST(SigningTest, KeyTextRoundTrips) {
  const SecretKey key = KeyFromByte(3);
  const std::string pub = FormatPublicKey(key.public_key());
  EXPECT_EQ(pub.rfind("tunefarm-ed25519-public v1\n", 0), 0u) << pub;
  EXPECT_NE(pub.find(key.public_key().Id()), std::string::npos);
  auto parsed = ParsePublicKey(pub);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, key.public_key());

  // The bare hex line works too, as in an environment variable.
  const std::string hex = pub.substr(pub.rfind('\n', pub.size() - 2) + 1);
  parsed = ParsePublicKey(hex);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, key.public_key());

  auto secret = ParseSecretKey(FormatSecretKey(key));
  ASSERT_TRUE(secret.ok()) << secret.status().message();
  EXPECT_EQ(secret->public_key(), key.public_key());
  EXPECT_TRUE(VerifySignature(key.public_key(), "m", secret->Sign("m")));
}

TEST(SigningTest, KeyPairFiles) {
  TempDir dir;
  const std::string sec = dir.Sub("farm.key"), pub = dir.Sub("farm.pub");
  auto generated = GenerateKeyPairFiles(sec, pub);
  ASSERT_TRUE(generated.ok()) << generated.status().message();

  struct stat st;
  ASSERT_EQ(::stat(sec.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(pub.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  auto secret = ReadSecretKeyFile(sec);
  ASSERT_TRUE(secret.ok()) << secret.status().message();
  auto public_key = ReadPublicKeyFile(pub);
  ASSERT_TRUE(public_key.ok()) << public_key.status().message();
  EXPECT_EQ(secret->public_key(), *generated);
  EXPECT_EQ(*public_key, *generated);

  // Never replaces a key: the existing one would be lost for good.
  const std::string before = Slurp(sec);
  auto again = GenerateKeyPairFiles(sec, dir.Sub("other.pub"));
  EXPECT_ERROR_HAS(again, sec);
  EXPECT_ERROR_HAS(again, "already exists");
  again = GenerateKeyPairFiles(dir.Sub("other.key"), pub);
  EXPECT_ERROR_HAS(again, pub);
  EXPECT_FALSE(fs::exists(dir.Sub("other.key")));
  EXPECT_FALSE(fs::exists(dir.Sub("other.pub")));
  EXPECT_EQ(Slurp(sec), before);
}

TEST(SigningTest, BadKeyFilesGiveOneLineNamingTheFile) {
  TempDir dir;
  const SecretKey key = KeyFromByte(4);
  const std::string good_pub = FormatPublicKey(key.public_key());
  const std::string good_sec = FormatSecretKey(key);

  const std::string missing = dir.Sub("missing.pub");
  auto r = ReadPublicKeyFile(missing);
  EXPECT_ERROR_HAS(r, missing);
  EXPECT_ERROR_HAS(r, "cannot open");

  struct Case {
    const char* name;
    std::string text;
    const char* says;
  };
  const Case public_cases[] = {
      {"empty.pub", "", "empty public key file"},
      {"junk.pub", "hello world\n", "not a tunefarm public key file"},
      {"secret.pub", good_sec, "holds a secret key"},
      {"version.pub", "tunefarm-ed25519-public v9\n" + std::string(64, 'a') + "\n", "version"},
      {"short.pub", "tunefarm-ed25519-public v1\nabcdef\n", "64 hex digits"},
      {"nothex.pub", "tunefarm-ed25519-public v1\n" + std::string(64, 'g') + "\n", "64 hex digits"},
      {"nokey.pub", "tunefarm-ed25519-public v1\n# only a comment\n", "no key"},
      {"extra.pub", good_pub + "trailing junk\n", "unexpected text"},
  };
  for (const Case& c : public_cases) {
    const std::string path = dir.Sub(c.name);
    Spit(path, c.text);
    auto k = ReadPublicKeyFile(path);
    EXPECT_ERROR_HAS(k, path);
    EXPECT_ERROR_HAS(k, c.says);
    EXPECT_EQ(k.status().message().find('\n'), std::string::npos) << k.status().message();
  }

  const std::string pub_as_secret = dir.Sub("pub_as.key");
  Spit(pub_as_secret, good_pub, 0600);
  auto s = ReadSecretKeyFile(pub_as_secret);
  EXPECT_ERROR_HAS(s, pub_as_secret);
  EXPECT_ERROR_HAS(s, "holds a public key");

  const std::string open_secret = dir.Sub("open.key");
  Spit(open_secret, good_sec, 0644);
  s = ReadSecretKeyFile(open_secret);
  EXPECT_ERROR_HAS(s, open_secret);
  EXPECT_ERROR_HAS(s, "permissions 0644");
  EXPECT_ERROR_HAS(s, "chmod 600");

  const std::string bad_secret = dir.Sub("bad.key");
  Spit(bad_secret, "tunefarm-ed25519-secret v1\nxyz\n", 0600);
  s = ReadSecretKeyFile(bad_secret);
  EXPECT_ERROR_HAS(s, bad_secret);
  EXPECT_ERROR_HAS(s, "64 hex digits");

  // Comments, blank lines and CRLF line ends are fine.
  const std::string crlf = dir.Sub("crlf.pub");
  std::string text = "# farm key\n\n";
  for (char c : good_pub) text += c == '\n' ? std::string("\r\n") : std::string(1, c);
  Spit(crlf, text);
  auto ok = ReadPublicKeyFile(crlf);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, key.public_key());
}

class SignedBundleTest : public ::testing::Test {
 protected:
  SignedBundleTest() : key_(KeyFromByte(5)), other_(KeyFromByte(6)) {}
  SecretKey key_, other_;
  TempDir dir_;
};

TEST_F(SignedBundleTest, RoundTrip) {
  const std::string base = dir_.Sub("gemm");
  ASSERT_TRUE(WriteSignedBundleFiles(SmallBundle(), key_, base).ok());
  EXPECT_TRUE(fs::exists(base + ".json"));
  PublicKey signer;
  auto b = ReadVerifiedBundleFile(base + ".tfb", {other_.public_key(), key_.public_key()}, &signer);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(signer, key_.public_key());
  EXPECT_EQ(BundleToJson(*b), BundleToJson(SmallBundle()));
  EXPECT_EQ(Slurp(base + ".json"), BundleToJson(SmallBundle()));

  // Tools that only show a bundle read signed files too, and learn who
  // claims to have signed them.
  std::string id;
  auto shown = ReadBundleFile(base + ".tfb", &id);
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_EQ(id, key_.public_key().Id());
  EXPECT_EQ(BundleToJson(*shown), BundleToJson(SmallBundle()));
}

TEST_F(SignedBundleTest, EveryChangedByteIsRefused) {
  const std::string base = dir_.Sub("gemm");
  ASSERT_TRUE(WriteSignedBundleFiles(SmallBundle(), key_, base).ok());
  const std::string good = Slurp(base + ".tfb");
  const std::string path = dir_.Sub("tampered.tfb");
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(bytes[i] ^ flip);
      Spit(path, bytes);
      auto r = ReadVerifiedBundleFile(path, {key_.public_key()});
      ASSERT_FALSE(r.ok()) << "byte " << i << " ^ " << int(flip) << " was accepted";
      ASSERT_EQ(r.status().message().rfind("bundle " + path + ": ", 0), 0u) << r.status().message();
    }
  }
  for (size_t cut : {size_t{0}, size_t{8}, size_t{31}, good.size() / 2, good.size() - 1}) {
    Spit(path, good.substr(0, cut));
    EXPECT_FALSE(ReadVerifiedBundleFile(path, {key_.public_key()}).ok()) << cut;
  }
  Spit(path, good + std::string(8, '\0'));
  EXPECT_FALSE(ReadVerifiedBundleFile(path, {key_.public_key()}).ok());
  Spit(path, good);
  EXPECT_TRUE(ReadVerifiedBundleFile(path, {key_.public_key()}).ok());
}

TEST_F(SignedBundleTest, ChangedPayloadSaysSo) {
  const std::string base = dir_.Sub("gemm");
  ASSERT_TRUE(WriteSignedBundleFiles(SmallBundle(), key_, base).ok());
  std::string bytes = Slurp(base + ".tfb");
  bytes[40] ^= 1;
  Spit(base + ".tfb", bytes);
  auto r = ReadVerifiedBundleFile(base + ".tfb", {key_.public_key()});
  EXPECT_ERROR_HAS(r, "signature check failed");
  EXPECT_ERROR_HAS(r, key_.public_key().Id());
}

TEST_F(SignedBundleTest, UnsignedIsRefused) {
  const std::string base = dir_.Sub("plain");
  ASSERT_TRUE(WriteBundleFiles(SmallBundle(), base).ok());
  auto r = ReadVerifiedBundleFile(base + ".tfb", {key_.public_key()});
  EXPECT_ERROR_HAS(r, base + ".tfb");
  EXPECT_ERROR_HAS(r, "not signed");
  // The unchecked reader still reads it.
  std::string id = "stale";
  EXPECT_TRUE(ReadBundleFile(base + ".tfb", &id).ok());
  EXPECT_EQ(id, "");
}

TEST_F(SignedBundleTest, UntrustedSignerIsRefused) {
  const std::string base = dir_.Sub("gemm");
  ASSERT_TRUE(WriteSignedBundleFiles(SmallBundle(), other_, base).ok());
  auto r = ReadVerifiedBundleFile(base + ".tfb", {key_.public_key()});
  EXPECT_ERROR_HAS(r, base + ".tfb");
  EXPECT_ERROR_HAS(r, "signed by key " + other_.public_key().Id() + ", which is not trusted");
  EXPECT_ERROR_HAS(r, key_.public_key().Id());
  r = ReadVerifiedBundleFile(base + ".tfb", {});
  EXPECT_ERROR_HAS(r, "no trusted public key");
}

TEST_F(SignedBundleTest, MissingFileNamesIt) {
  auto r = ReadVerifiedBundleFile(dir_.Sub("nope.tfb"), {key_.public_key()});
  EXPECT_ERROR_HAS(r, dir_.Sub("nope.tfb"));
  EXPECT_ERROR_HAS(r, "cannot open");
}

TEST_F(SignedBundleTest, InMemory) {
  const std::string bytes = EncodeSignedBundle(SmallBundle(), key_);
  EXPECT_EQ(bytes.substr(0, 8), "TFBUNDLE");
  EXPECT_TRUE(DecodeVerifiedBundle(bytes.data(), bytes.size(), {key_.public_key()}).ok());
  EXPECT_FALSE(DecodeVerifiedBundle(bytes.data(), bytes.size(), {other_.public_key()}).ok());
  EXPECT_FALSE(DecodeVerifiedBundle(nullptr, 0, {key_.public_key()}).ok());
}

}  // namespace
}  // namespace tune
