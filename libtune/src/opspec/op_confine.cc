#include "op_confine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cctype>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>

namespace tune {
namespace {

bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == '+';
}

// `text` with each backslash-newline spliced out and each comment replaced
// by a space (translation phases 2 and 3), string and character literals
// kept, so that `#/**/include` and `#\<newline>include` are seen as what the
// preprocessor sees. The alternative spellings of '#' and '\\' are read as
// those: the digraph `%:` (outside literals) and the trigraphs `??=` and
// `??/` (which a compiler in a trigraph mode replaces everywhere first).
// Newlines of block comments are kept for line numbers.
std::string Phase3(const std::string& source) {
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '?' && i + 2 < source.size() && source[i + 1] == '?' &&
        (source[i + 2] == '=' || source[i + 2] == '/')) {
      text += source[i + 2] == '=' ? '#' : '\\';
      i += 2;
      continue;
    }
    text += source[i];
  }
  std::string spliced;
  spliced.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\') {
      size_t j = i + 1;
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        i = j;
        continue;
      }
    }
    spliced += text[i];
  }
  std::string out;
  out.reserve(spliced.size());
  for (size_t i = 0; i < spliced.size(); ++i) {
    const char c = spliced[i];
    if (c == '"' || c == '\'') {
      // A literal runs to its closing quote or the end of the line.
      out += c;
      for (++i; i < spliced.size() && spliced[i] != c && spliced[i] != '\n'; ++i) {
        out += spliced[i];
        if (spliced[i] == '\\' && i + 1 < spliced.size() && spliced[i + 1] != '\n') out += spliced[++i];
      }
      if (i < spliced.size()) out += spliced[i];
    } else if (c == '/' && i + 1 < spliced.size() && spliced[i + 1] == '/') {
      while (i < spliced.size() && spliced[i] != '\n') ++i;
      out += ' ';
      if (i < spliced.size()) out += '\n';
    } else if (c == '/' && i + 1 < spliced.size() && spliced[i + 1] == '*') {
      out += ' ';
      for (i += 2; i < spliced.size() && !(spliced[i] == '*' && i + 1 < spliced.size() && spliced[i + 1] == '/'); ++i) {
        if (spliced[i] == '\n') out += '\n';
      }
      ++i;  // the '/'
    } else if (c == '%' && i + 1 < spliced.size() && spliced[i + 1] == ':') {
      out += '#';
      ++i;
    } else {
      out += c;
    }
  }
  return out;
}

bool ClimbsOrIsAbsolute(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\\') != std::string_view::npos) return true;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

Status CheckPackageFileName(const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Status::Error("op package: file name '" + name + "' " + why);
  };
  if (name.empty() || name.size() > 255) return bad("must have 1 to 255 bytes");
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string_view part = std::string_view(name).substr(start, end - start);
    if (part.empty() || part.front() == '.') return bad("is not a plain relative name (empty, '.' or '..' part)");
    for (char c : part)
      if (!NameChar(c)) return bad("holds a character outside [A-Za-z0-9._+-/]");
    start = end + 1;
  }
  return Status::OK();
}

bool IsIncludeRootName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

Status CheckCompileOption(const std::string& option) {
  static const std::regex kAllowed(
      "--?(use_fast_math|lineinfo|generate-line-info|restrict|extra-device-vectorization|default-device"
      "|device-as-default-execution-space)"
      "|-D[A-Za-z_][A-Za-z0-9_]*(=[^\\s]*)?|--define-macro=[A-Za-z_][A-Za-z0-9_]*(=[^\\s]*)?"
      "|-U[A-Za-z_][A-Za-z0-9_]*|--undefine-macro=[A-Za-z_][A-Za-z0-9_]*"
      "|--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)"
      "|--?maxrregcount=[0-9]{1,3}"
      "|--?std=c\\+\\+(17|20)"
      "|(-arch|--gpu-architecture)=(sm|compute)_[0-9]{2,3}[af]?");
  if (std::regex_match(option, kAllowed)) return Status::OK();
  return Status::Error("NVRTC option '" + option +
                       "' is not on the allow-list (macros, -arch, -use_fast_math, -lineinfo, -ftz, -prec-div, "
                       "-prec-sqrt, -fmad, -maxrregcount, -std, -restrict, -extra-device-vectorization, "
                       "-default-device)");
}

Status CheckIncludes(const std::string& file, const std::string& text,
                     const std::function<bool(const std::string&, const std::string&)>& resolves) {
  // A directive: optional blanks, '#', blanks, a name among those that read
  // a file (C, C++, GNU and NVRTC spellings), then its operand.
  static const std::regex kDirective(R"(^[ \t\f\v]*#[ \t\f\v]*(include_next|include|import|embed)\b[ \t\f\v]*(.*)$)");
  static const std::regex kHasInclude(R"(__has_include(_next)?\s*\(\s*([<"])([^>")]*)[>"])");
  const std::string clean = Phase3(text);
  size_t line_no = 0, pos = 0;
  while (pos <= clean.size()) {
    size_t end = clean.find('\n', pos);
    if (end == std::string::npos) end = clean.size();
    const std::string line = clean.substr(pos, end - pos);
    ++line_no;
    pos = end + 1;
    auto bad = [&](const std::string& why) {
      return Status::Error("op package: " + file + ":" + std::to_string(line_no) + ": " + why);
    };
    std::smatch m;
    if (std::regex_search(line, m, kHasInclude)) {
      const std::string target = m[3].str();
      if (ClimbsOrIsAbsolute(target)) return bad("__has_include of '" + target + "' looks outside the op package");
    }
    if (!std::regex_match(line, m, kDirective)) continue;
    const std::string directive = m[1].str();
    const std::string operand = m[2].str();
    if (directive != "include") return bad("#" + directive + " is not allowed in an op");
    const size_t close = operand.size() > 1 ? operand.find(operand[0] == '<' ? '>' : '"', 1) : std::string::npos;
    if (operand.empty() || (operand[0] != '"' && operand[0] != '<') || close == std::string::npos) {
      return bad("#include must name a literal \"file\" or <header>");
    }
    const std::string target = operand.substr(1, close - 1);
    if (ClimbsOrIsAbsolute(target)) return bad("#include of '" + target + "' looks outside the op package");
    if (operand[0] == '"' && !resolves(file, target)) {
      return bad("#include \"" + target + "\" is no file of the op package (use <...> for toolkit headers)");
    }
  }
  return Status::OK();
}

// --- #include discovery ---

std::vector<std::pair<std::string, bool>> IncludeTargets(const std::string& text) {
  // Read as the preprocessor (and CheckIncludes) reads it: a comment or a
  // spliced line must not hide an include from the closure.
  static constexpr const char* kBlank = " \t\f\v";
  std::vector<std::pair<std::string, bool>> out;
  std::istringstream in(Phase3(text));
  std::string line;
  while (std::getline(in, line)) {
    size_t i = line.find_first_not_of(kBlank);
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(kBlank, i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(kBlank, i + 7);
    if (i == std::string::npos || (line[i] != '"' && line[i] != '<')) continue;
    const bool angled = line[i] == '<';
    size_t end = line.find(angled ? '>' : '"', i + 1);
    if (end == std::string::npos || end == i + 1) continue;
    out.emplace_back(line.substr(i + 1, end - i - 1), angled);
  }
  return out;
}

namespace {

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Why `name` (in the open folder `dir`, shown as `shown`) could not be
// opened with O_NOFOLLOW: a link says so, whatever errno the open gave.
Status OpenRefusal(int dir, const std::string& name, const std::string& shown, int err) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    return Status::InvalidArgument("'" + shown + "' is a symbolic link; packages hold files only");
  const std::string why = "cannot read '" + shown + "': " + std::strerror(err);
  return err == ENOENT || err == ENOTDIR ? Status::NotFound(why) : Status::IOError(why);
}

}  // namespace

Status ReadOpFolderFile(const std::string& root, const std::string& rel, size_t max_bytes, std::string* out) {
  const std::filesystem::path root_path(root);
  std::vector<std::string> parts;
  for (const auto& part : std::filesystem::path(rel)) parts.push_back(part.string());
  const std::string whole = (root_path / rel).string();
  if (parts.empty() || !InFolder(rel) || *InFolder(rel) != rel)
    return Status::InvalidArgument("'" + whole + "' is not a file name inside the op folder");
  Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd < 0) {
    const int err = errno;
    const std::string why = "cannot read '" + root + "': " + std::strerror(err);
    return err == ENOENT || err == ENOTDIR ? Status::NotFound(why) : Status::IOError(why);
  }
  std::filesystem::path shown = root_path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    shown /= parts[i];
    const int sub = ::openat(dir.fd, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      const int err = errno;
      return OpenRefusal(dir.fd, parts[i], shown.string(), err);
    }
    ::close(dir.fd);
    dir.fd = sub;
  }
  const std::string& leaf = parts.back();
  // Looked at before it is opened, so that a device or a FIFO is never
  // opened at all; checked again on the descriptor, which is what is read.
  struct stat st {};
  if (::fstatat(dir.fd, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    const int err = errno;
    return OpenRefusal(dir.fd, leaf, whole, err);
  }
  if (S_ISLNK(st.st_mode)) return Status::InvalidArgument("'" + whole + "' is a symbolic link; packages hold files only");
  // A folder where a file was looked for is no file of that name (an
  // #include candidate); a FIFO, device or socket is refused.
  if (S_ISDIR(st.st_mode)) return Status::NotFound("cannot read '" + whole + "': " + std::strerror(EISDIR));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + whole + "' is not a regular file");
  Fd file(::openat(dir.fd, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (file.fd < 0) {
    const int err = errno;
    return OpenRefusal(dir.fd, leaf, whole, err);
  }
  if (::fstat(file.fd, &st) != 0) return Status::IOError("cannot read '" + whole + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + whole + "' is not a regular file");
  auto too_large = [&] {
    return Status::InvalidArgument("'" + whole + "' holds more than the limit of " + std::to_string(max_bytes) +
                                   " bytes per package");
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_large();
  // Read to the end, not to the size seen: the file may grow meanwhile.
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(file.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IOError("cannot read '" + whole + "': " + std::strerror(errno));
    if (n == 0) break;
    if (data.size() + static_cast<size_t>(n) > max_bytes) return too_large();
    data.append(buf, static_cast<size_t>(n));
  }
  *out = std::move(data);
  return Status::OK();
}

std::optional<std::string> InFolder(const std::filesystem::path& p) {
  std::filesystem::path n = p.lexically_normal();
  if (n.empty() || n.is_absolute()) return std::nullopt;
  for (const auto& part : n)
    if (part == "..") return std::nullopt;
  return n.generic_string();
}

std::vector<std::string> IncludeCandidates(const std::string& includer, const std::string& name, bool angled,
                                           const std::vector<std::string>& include_dirs) {
  std::vector<std::string> out;
  auto add = [&out](const std::filesystem::path& p) {
    if (auto f = InFolder(p); f && std::find(out.begin(), out.end(), *f) == out.end()) out.push_back(*f);
  };
  if (!angled) add(std::filesystem::path(includer).parent_path() / name);
  for (const std::string& dir : include_dirs) add(std::filesystem::path(dir) / name);
  add(std::filesystem::path(name));
  return out;
}

std::set<std::string> IncludeClosure(const std::vector<std::string>& roots,
                                     const std::function<const std::string*(const std::string&)>& get,
                                     const std::vector<std::string>& include_dirs) {
  std::set<std::string> seen(roots.begin(), roots.end());
  std::vector<std::string> unread(roots.begin(), roots.end());  // found, not yet scanned
  while (!unread.empty()) {
    std::string file = unread.back();
    unread.pop_back();
    const std::string* text = get(file);
    if (!text) continue;
    for (const auto& [inc, angled] : IncludeTargets(*text)) {
      for (const std::string& cand : IncludeCandidates(file, inc, angled, include_dirs)) {
        if (!get(cand)) continue;
        if (seen.insert(cand).second) unread.push_back(cand);
        break;
      }
    }
  }
  return seen;
}

}  // namespace tune
