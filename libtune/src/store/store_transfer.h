// Moving measurements between farms (`tunefarm store export` / `import`): a
// lab's H200 farm and a cloud's H100 farm merge what each measured.
//
// An export file holds, for the rows a filter selects, everything a store
// keeps of them: the rows with their provenance (worker, sweep, time,
// pass), the op packages their kernel hashes were measured from (publish
// reads specs from the store), the cubins, coverage records, profiles and
// baselines.
//
// Import is insert-only and idempotent: a row whose key (GPU model, op,
// dtype, shape, kernel hash, config) is stored already keeps the stored one,
// whatever pass the file's row claims (the file's first row of a key is its
// word); two farms that measured a key under different kernel hashes keep
// both, as one farm does across kernel versions; coverage, profiles and
// baselines follow their Put rules (a baseline: the newer figure). Each
// new row passes what a worker's row passes at the coordinator's door: a
// row dated ahead of this host's clock (by more than an hour) or faster
// than its config's physical floor on a known GPU model is refused, and
// counted, as is a baseline (which keeps the newer figure); the cubins of
// refused rows stay out, and a package is dated no later than the import. A file is a peer's word and no witness: an imported cubin is
// stored without one, so it ships only once this farm recompiles it or two
// of its own workers' keys send the same bytes. An import checks every
// record's form first (key text, a config that is its id's, finite
// figures, cubin checksums and ELF form, packages that parse under their
// name) and refuses the file, naming the record, before it writes anything.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

#include "base/env.h"
#include "store/result_store.h"
#include "tune/status.h"

namespace tune {

struct TransferCounts {
  size_t ops = 0, rows = 0, kernels = 0, coverage = 0, profiles = 0, baselines = 0;
  // Import (kPeer): rows stored, rows whose key the store (or the file,
  // before them) held, rows the door refused, and the first reasons.
  size_t rows_new = 0, rows_present = 0, rows_refused = 0;
  std::vector<std::string> refusals;
};
inline constexpr size_t kMaxReportedRefusals = 8;

// Writes the rows `filter` selects (and what the store keeps of them) to
// `path` (written beside and renamed into place). Errors name the file.
Status ExportStore(ResultReader& store, const ResultFilter& filter, const std::string& path, TransferCounts* counts);

// Whose word an export file is. kPeer: another farm's (`store import`),
// held to the door as above. kMirror: this farm's own
// coordinator's, read over CURVE (a remote read, client/remote_store.h):
// the cubins keep the witnesses the coordinator's store gave them.
enum class ImportTrust { kPeer, kMirror };

// Reads an export file into `store`. Errors: not an export file, a newer
// format, a truncated file, a record that fails its checks (named by its
// number and kind); nothing is written then.
Status ImportStore(ResultStore& store, const std::string& path, TransferCounts* counts,
                   ImportTrust trust = ImportTrust::kPeer, Env& env = *Env::Default());
// The same from an export held in `in` (a seekable stream: a remote read's
// pieces gathered in memory); `name` names it in errors.
Status ImportStore(ResultStore& store, std::istream& in, const std::string& name, TransferCounts* counts,
                   ImportTrust trust = ImportTrust::kPeer, Env& env = *Env::Default());

}  // namespace tune
