// An op package as a folder on the measuring host, for what reads it from
// disk: program ops' commands, and NVRTC for ops with [op] include folders
// (whose headers include each other by paths relative to themselves).
#pragma once

#include <string>

#include "opspec/op_definition.h"
#include "tune/status.h"

namespace tune {

// `spec.package` under root/<PackageDigest>, unpacked the first time: written
// beside its final name and renamed into place, so that a reader never sees
// half of it and hosts' processes share one copy. Scripts and binaries keep
// what makes them runnable (the package holds contents, not modes).
// Thread- and process-safe. Errors name the op and the folder.
Result<std::string> UnpackedPackage(const OpSpec& spec, const std::string& root);

}  // namespace tune
