// The converters of the envelope's parts that stored records reuse: a lease
// record keeps its WorkUnit and an op record its OpPackage in the envelope's
// own encoding (schema/protocol.capnp), so the two never drift apart. Same
// discipline and thread safety as codec/codec.h.
#pragma once

#include "codec/codec.h"
#include "schema/protocol.capnp.h"
#include "opspec/op_definition.h"
#include "protocol/protocol.h"

namespace tune::codec {

void SetOpPackage(wire::OpPackage::Builder b, const OpPackage& p);
// Fails (DecodeError) on two files of one name.
OpPackage GetOpPackage(wire::OpPackage::Reader r, Budget& budget);
void SetWorkUnit(wire::WorkUnit::Builder b, const WorkUnit& w);
WorkUnit GetWorkUnit(wire::WorkUnit::Reader r, Budget& budget);
void SetStoredDigests(capnp::List<wire::StoredDigest>::Builder b, const std::vector<StoredDigest>& v);
std::vector<StoredDigest> GetStoredDigests(capnp::List<wire::StoredDigest>::Reader r, Budget& budget);

}  // namespace tune::codec
