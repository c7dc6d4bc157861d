// Records as the store keeps them (schema/records.capnp): measurements,
// leases, sweeps. Decoding does not check text: a store written before the
// codec did must still be read (writers of JSON and reports replace invalid
// bytes).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "protocol/protocol.h"
#include "tune/status.h"
#include "opspec/sweep_file.h"
#include "base/types.h"

namespace tune {

std::string EncodeMeasurement(const Measurement& m);
Result<Measurement> DecodeMeasurement(const void* data, size_t size);

// A unit as the coordinator leased it, kept in its store (ResultStore::
// PutLease) so that a restarted coordinator accepts the honest resends of it.
struct LeaseRecord {
  WorkUnit unit;                      // without its op package
  std::string gpu_model;
  // Who it was leased to: each lessee's CURVE public key (Z85) where the
  // coordinator runs CURVE, else its worker name.
  std::vector<std::string> lessees;
};
std::string EncodeLeaseRecord(const LeaseRecord& rec);
Result<LeaseRecord> DecodeLeaseRecord(const void* data, size_t size);

// When sweep `sweep_id` was submitted: sweep ids are "<unix time, hex>-<random
// hex>" (the coordinator's NewSweepId). 0 for an id of another form.
int64_t SweepSubmittedUnix(const std::string& sweep_id);

// A sweep as the coordinator stores it (ResultStore's sweeps family): its
// state ("running" | "done" | "failed") and the submit, with the op packages.
struct SweepRecord {
  std::string state;
  SweepSubmit submit;
  // An ended sweep's last progress, so that `status` still shows it after a
  // restart. Absent in records of running sweeps (and older ended ones).
  std::optional<SweepProgress> progress;
};
std::string EncodeSweepRecord(const SweepRecord& r);
Result<SweepRecord> DecodeSweepRecord(const std::string& bytes);

// An op package as the store keeps it (ResultStore::PutOp): the package a
// sweep brought for op `name`, submitted at `submitted_unix`.
struct OpRecord {
  std::string name;
  int64_t submitted_unix = 0;
  OpPackage package;
};
std::string EncodeOpRecord(const OpRecord& r);
Result<OpRecord> DecodeOpRecord(const void* data, size_t size);

// A key's coverage as the store keeps it (ResultStore::PutCoverage).
std::string EncodeCoverage(const KeyCoverage& c);
Result<KeyCoverage> DecodeCoverage(const void* data, size_t size);

// A measured cubin as the store keeps it (ResultStore::PutKernel).
std::string EncodeProfile(const KernelProfile& p);
Result<KernelProfile> DecodeProfile(const void* data, size_t size);
std::string EncodeKernelImage(const KernelImage& k);
Result<KernelImage> DecodeKernelImage(const void* data, size_t size);

}  // namespace tune
