// A synthetic cubin for tests without NVRTC: the ELF header, flags and
// symbol table that CheckCubin and CheckCubinEntries read, no code.
#pragma once

#include <cstdint>
#include <string>

namespace tune::testing {

// A cubin for `arch` ("sm_90", "sm_90a") defining the global function
// `entry`; `tag` makes images of different configs differ.
inline std::string SyntheticCubin(const std::string& arch, const std::string& entry, const std::string& tag = "") {
  auto put = [](std::string& b, size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
  };
  const int sm = std::stoi(arch.substr(3, 3));
  const std::string strtab = std::string(1, '\0') + entry + '\0' + tag + '\0' + std::string(600, 'c');
  std::string symtab(48, '\0');
  put(symtab, 24, 1, 4);                      // name: the entry
  symtab[24 + 4] = char((1 << 4) | 2);        // STB_GLOBAL, STT_FUNC
  std::string b(64, '\0');
  b.replace(0, 4, "\x7f" "ELF");
  b[4] = 2;     // 64-bit
  b[5] = 1;     // little-endian
  b[6] = 1;
  b[7] = 0x41;  // the CUDA OS ABI
  b[8] = 8;     // its ABI version 8: the SM in the flags' second byte
  const size_t str_off = b.size();
  b += strtab;
  const size_t sym_off = b.size();
  b += symtab;
  const size_t sh_off = b.size();
  b += std::string(3 * 64, '\0');
  put(b, 16, 2, 2);                                     // ET_EXEC
  put(b, 18, 190, 2);                                   // EM_CUDA
  put(b, 20, 1, 4);
  put(b, 40, sh_off, 8);
  put(b, 48, 0x06000004u | (uint64_t(sm) << 8), 4);
  put(b, 52, 64, 2);
  put(b, 58, 64, 2);
  put(b, 60, 3, 2);
  const size_t s1 = sh_off + 64, s2 = sh_off + 128;
  put(b, s1 + 4, 3, 4);                                 // SHT_STRTAB
  put(b, s1 + 24, str_off, 8);
  put(b, s1 + 32, strtab.size(), 8);
  put(b, s2 + 4, 2, 4);                                 // SHT_SYMTAB
  put(b, s2 + 24, sym_off, 8);
  put(b, s2 + 32, symtab.size(), 8);
  put(b, s2 + 40, 1, 4);                                // its names: section 1
  put(b, s2 + 56, 24, 8);
  return b;
}

// A stand-in CURVE public key (40 Z85 characters) named after `name`, for
// witnesses (WitnessOfKey) in tests without a real key pair.
inline std::string TestKey(const std::string& name) { return (name + std::string(40, '0')).substr(0, 40); }

}  // namespace tune::testing
