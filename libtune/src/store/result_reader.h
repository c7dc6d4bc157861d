// ResultReader: what reports read of a farm's results, wherever they are.
//
// Implemented by ResultStore (store/result_store.h): a RocksDB store in a
// folder, one held in this process's memory (ResultStore::OpenInMemory:
// tests, replay, and a coordinator's rows read remotely, client/
// remote_store.h, which leave nothing on disk). Publish, compare, nightly
// and the printers take a ResultReader: they read the same rows whether the
// store is on this host or a farm's, and cannot write to it.
//
// Rows are Measurements keyed by (gpu_model, op, dtype, shape, kernel_hash,
// config_id); the records beside them (op packages, cubins, coverage,
// profiles, baselines) are described where ResultStore writes them.
// Thread safety: as the implementation's (ResultStore: any thread).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/profile.h"
#include "base/types.h"
#include "tune/status.h"

namespace tune {

struct OpRecord;  // records.h

class ResultReader {
 public:
  virtual ~ResultReader() = default;

  // The row of a key; nullopt when none is stored.
  virtual std::optional<Measurement> Get(const std::string& gpu_model, const std::string& op,
                                         const std::string& dtype, const std::string& shape,
                                         const std::string& kernel_hash, const std::string& config_id) = 0;
  // Visits every row matching `filter` in key order; stop early by
  // returning false from `fn`.
  virtual Status Scan(const ResultFilter& filter, const std::function<bool(const Measurement&)>& fn) = 0;
  // The best valid row per (gpu_model, op, dtype, shape, kernel_hash):
  // a row of a later pass outranks every row of an earlier one (confirm,
  // refine, screening), then the lower median wins.
  virtual Result<std::vector<Measurement>> Best(const ResultFilter& filter) = 0;
  // Number of rows (exact).
  virtual Result<uint64_t> CountResults() = 0;

  // Every op package record; `fn` gets each (records.h OpRecord) in no set
  // order.
  virtual Status ForEachOp(const std::function<void(const OpRecord& op)>& fn) = 0;
  // The coverage of a key (nullopt: none recorded).
  virtual Result<std::optional<KeyCoverage>> GetCoverage(const std::string& gpu_model, const std::string& op,
                                                         const std::string& dtype, const std::string& shape,
                                                         const std::string& kernel_hash) = 0;
  // The cubin a config was measured with; NotFound when none is kept.
  virtual Result<KernelImage> GetKernel(const std::string& kernel_hash, const std::string& config_id,
                                        const std::string& dtype, const std::string& arch) = 0;
  // NotFound when the row has no profile.
  virtual Result<KernelProfile> GetProfile(const std::string& gpu_model, const std::string& op,
                                           const std::string& dtype, const std::string& shape,
                                           const std::string& kernel_hash, const std::string& config_id) = 0;
  // The op's baseline library timed on a key; NotFound when none was stored.
  virtual Result<Measurement> GetBaseline(const std::string& gpu_model, const std::string& op,
                                          const std::string& dtype, const std::string& shape) = 0;

  // Every record of a kind, in key order (`store export`); a record that
  // does not decode is skipped (the store's checks admitted it once).
  virtual Status ForEachKernel(const std::function<void(const KernelImage&)>& fn) = 0;  // with its witnesses
  virtual Status ForEachCoverage(const std::function<void(const KeyCoverage&)>& fn) = 0;
  virtual Status ForEachProfile(const std::function<void(const KernelProfile&)>& fn) = 0;
  virtual Status ForEachBaseline(const std::function<void(const Measurement&)>& fn) = 0;
};

}  // namespace tune
