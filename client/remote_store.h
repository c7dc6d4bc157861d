// Reading a farm's store through its coordinator (StoreRead, StoreChunk):
// the rows a filter selects, with the op packages, cubins, coverage,
// profiles and baselines the store keeps of them, fetched as a `store
// export` and imported into a store in this process's memory (nothing is
// written to disk). What `results`, `best`, `compare`, `publish` and
// `nightly` read with --coordinator, and Python's Farm.connect: every
// report then reads the same rows (a ResultReader) it reads on the
// coordinator's host.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coordinator_client.h"
#include "store/result_store.h"
#include "tune/status.h"

namespace tune {

// How long one piece of a remote read may take: the first waits for the
// whole export to be made.
inline constexpr double kStoreReadTimeoutSeconds = 300;

// Fetches the rows each of `filters` selects from the coordinator `client`
// talks to into a new in-memory store (ResultStore's in_memory). Over CURVE
// (`authenticated`) the coordinator's cubin witnesses are kept: the farm's
// own store is not a peer's word; in plaintext an imported cubin has no
// witness, as a `store import`'s. Errors: the coordinator's refusal or
// silence, a piece that does not continue the export, the import's checks
// (store/store_transfer.h).
Result<std::unique_ptr<ResultStore>> FetchStore(CoordinatorClient& client, const std::vector<ResultFilter>& filters,
                                                bool authenticated);

}  // namespace tune
