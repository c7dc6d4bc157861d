// What an op package may ask of the host that compiles it.
//
// A sweep carries an op's sources and NVRTC options to every worker. NVRTC
// reads files of the worker's host where the package lets it: an include
// path option (-I/, --pre-include=/etc/...), an #include of an absolute or
// climbing path, a quoted #include that no package file answers (NVRTC then
// looks beside the process). Compile logs go back to the submitter, so any of
// these would leak the host's files. ParseOpSpec applies these rules, so a
// package is refused at `submit` (the client and the coordinator parse it)
// and again by every worker before it compiles anything.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "opspec/op_definition.h"
#include "tune/status.h"

namespace tune {

// OK when `name` is a plain relative file name inside the op folder:
// components of [A-Za-z0-9._+-], none empty, "." or "..", none starting
// with '.', at most 255 bytes in all.
Status CheckPackageFileName(const std::string& name);

// True for a name of an include root (opspec/op_definition.h IncludeRoots): 1 to
// 64 of [A-Za-z0-9_.-], not starting with '.'.
bool IsIncludeRootName(const std::string& name);

// OK when `option` is on the allow-list of op NVRTC options: macros
// (-D/-U, --define-macro/--undefine-macro), -use_fast_math, -lineinfo,
// -ftz/-prec-div/-prec-sqrt/-fmad=true|false, -maxrregcount=N,
// -std=c++17|c++20, -restrict, -extra-device-vectorization, -default-device
// and -arch=sm_XX/compute_XX (with an a or f suffix), each in its -x and
// --x spellings. Nothing that names a file or a folder is on it.
Status CheckCompileOption(const std::string& option);

// OK when every #include-like directive of `text` (after line splicing and
// comments are taken out) names a literal "file" that `resolves` maps to a
// package file, or a <header> with a relative path without "..": a toolkit
// header. `resolves(includer, target)` is true when the quoted include
// `target` of `includer` is a file of the package. Errors name `file`, the
// line and the directive.
Status CheckIncludes(const std::string& file, const std::string& text,
                     const std::function<bool(const std::string& includer, const std::string& target)>& resolves);

// Reads the file `rel` of the op folder `root` into *out: the one way a
// file of an op folder enters a package (ReadOpPackage: op.toml, sources,
// the headers they include, reference, init files, [program] files,
// [op] include), so that what `submit`, `op check` and the kernel hash see
// is what this allows. A package goes to every worker and into the store,
// so a symbolic link anywhere under `root` is refused (it could take a file
// of the submitter's host, a key, into it): `rel` is walked one component
// at a time with openat(O_NOFOLLOW) from the folder above, so no link is
// ever followed, not even one swapped in after a check. `root` itself may
// be a link: the user named it. A FIFO, device or socket is refused without
// being opened for a blocking read, and a file of more than `max_bytes`.
// `rel` is a name InFolder() returns. Errors are one line naming the path
// (for a link, the link itself): NotFound ("cannot read '...': ...") when
// a component does not exist or is not a folder (the include closure takes
// that as "not a package file"), InvalidArgument for a link, a file that is
// not regular, or one too large; IOError when the system refuses the read.
Status ReadOpFolderFile(const std::string& root, const std::string& rel, size_t max_bytes, std::string* out);

// #include discovery, shared by ReadOpPackage, the parser, SourceDigest and
// IncludeRootsDigest.
//
// The literal targets of the #include lines of `text`: (target, angled).
std::vector<std::pair<std::string, bool>> IncludeTargets(const std::string& text);
// A file name inside the op folder, or nullopt when the name would leave it.
std::optional<std::string> InFolder(const std::filesystem::path& p);
// Package candidates for an #include of `name` seen in `includer`, in the
// preprocessor's search order: for "name", beside the includer first; then,
// for both forms, each of `include_dirs` (the op's [op] include) and the op
// folder's root. None that would leave the folder.
std::vector<std::string> IncludeCandidates(const std::string& includer, const std::string& name, bool angled,
                                           const std::vector<std::string>& include_dirs = {});
// Files reachable from `roots` through includes that `get` finds among the
// candidates; names it does not know are toolkit or include-root headers and
// are skipped.
std::set<std::string> IncludeClosure(const std::vector<std::string>& roots,
                                     const std::function<const std::string*(const std::string&)>& get,
                                     const std::vector<std::string>& include_dirs = {});

}  // namespace tune
