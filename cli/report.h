// Printers for people and scripts: tables, CSV, JSON. Measurement code never
// prints; these never measure.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tune/bundle.h"
#include "tune/op_spec.h"
#include "tune/protocol.h"
#include "tune/types.h"

namespace tune {

enum class OutputFormat { kTable, kCsv, kJson };
// "table" | "csv" | "json"; false when unknown.
bool ParseOutputFormat(const std::string& text, OutputFormat* out);

// Every measurement, grouped by (gpu, op, dtype, shape) and sorted fastest
// first; the winner of each group is marked '*' in tables and "winner": true
// in JSON/CSV; failures show their class and the first line of the reason.
void PrintMeasurements(FILE* out, std::vector<Measurement> rows,
                       const std::map<std::string, OpSpec>& ops, OutputFormat format);

void PrintBundle(FILE* out, const Bundle& b);

}  // namespace tune
