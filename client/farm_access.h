// What the farm's programs and its C API share about reaching results and
// shipping them: opening a store where it is (a folder on this host, or a
// coordinator's, read remotely), the publish options of this host, and
// writing a signed bundle. Not a library contract: the `tunefarm` program
// and libtunefarm_farm.so include this.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coordinator_client.h"
#include "bundle/bundle.h"
#include "publish/publish.h"
#include "store/result_store.h"
#include "tune/status.h"

namespace tune {

// Opens the store at `path` read-only. Returns an error when it does not
// exist or does not open.
Result<std::unique_ptr<ResultStore>> OpenStore(const std::string& path);

// The store a report reads: the coordinator's at `remote.endpoint` when
// that is given (the rows `filters` select, fetched into this process's
// memory; remote_store.h), else the folder `path`, read-only.
Result<std::unique_ptr<ResultStore>> OpenStoreOf(const std::string& path, const ClientArgs& remote,
                                                 const std::vector<ResultFilter>& filters);

// Writes the bundle's .tfb and .json at `path` (no extension), making its
// folder: signed with `sign_key`, else the default key ($TUNEFARM_SIGN_KEY,
// else $XDG_CONFIG_HOME/tunefarm/bundle.key, default ~/.config, made with
// its .pub the first time it is needed), unless `unsigned_bundle`. Says on
// stderr which key signed it and what deployments must trust. Returns the
// first error of finding the key or writing the files.
Status WriteBundle(const Bundle& b, const std::string& path, const std::string& sign_key, bool unsigned_bundle);

// What `publish` (and `tune`'s bundle) ships: kernels when `kernels`, their
// cubins checked against this host's own compile where it has NVRTC.
PublishOptions PublishOptionsHere(bool kernels);

}  // namespace tune
