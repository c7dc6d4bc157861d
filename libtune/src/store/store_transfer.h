// Moving measurements between farms (`tunefarm store export` / `import`): a
// lab's H200 farm and a cloud's H100 farm merge what each measured.
//
// An export file holds, for the rows a filter selects, everything a store
// keeps of them: the rows with their provenance (worker, sweep, time,
// pass), the op packages their kernel hashes were measured from (publish
// reads specs from the store), the cubins, coverage records, profiles and
// baselines. Import is idempotent and never doubles a row: a row whose key
// (GPU model, op, dtype, shape, kernel hash, config) is stored already keeps
// the stored one (ResultStore::Put's rules, refine and confirm passes
// included); two farms that measured a key under different kernel hashes
// keep both, as one farm does across kernel versions; coverage, profiles and
// baselines follow their Put rules (a baseline: the newer figure). A file is
// a peer's word: an imported cubin counts as one witness ("import:FILE"),
// so it ships only once this farm recompiles it or its own workers send the
// same bytes. An import checks every record first (key text, a config
// that is its id's, finite figures, cubin checksums and ELF form, packages
// that parse under their name) and refuses the file, naming the record,
// before it writes anything.
#pragma once

#include <cstddef>
#include <string>

#include "store/result_store.h"
#include "tune/status.h"

namespace tune {

struct TransferCounts {
  size_t ops = 0, rows = 0, kernels = 0, coverage = 0, profiles = 0, baselines = 0;
  size_t rows_new = 0;  // import: rows the store did not hold
};

// Writes the rows `filter` selects (and what the store keeps of them) to
// `path` (written beside and renamed into place). Errors name the file.
Status ExportStore(ResultStore& store, const ResultFilter& filter, const std::string& path, TransferCounts* counts);

// Whose word an export file is. kPeer: another farm's (`store import`), its
// cubins count as one witness, "import:FILE". kMirror: this farm's own
// coordinator's, read over CURVE (a remote read, client/remote_store.h):
// the cubins keep the witnesses the coordinator's store gave them.
enum class ImportTrust { kPeer, kMirror };

// Reads an export file into `store`. Errors: not an export file, a newer
// format, a truncated file, a record that fails its checks (named by its
// number and kind); nothing is written then.
Status ImportStore(ResultStore& store, const std::string& path, TransferCounts* counts,
                   ImportTrust trust = ImportTrust::kPeer);

}  // namespace tune
