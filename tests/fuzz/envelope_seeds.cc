// Writes one valid envelope per command (several for the rich ones) into a
// directory: the seed corpus of envelope_fuzz. Valid seeds let the fuzzer
// start from deep inside the decoder instead of rediscovering the Cap'n
// Proto framing byte by byte.
//
//   envelope_seeds <dir>
#include <cstdio>
#include <fstream>
#include <string>

#include "protocol/protocol.h"

namespace {

using namespace tune;

DeviceInfo Device(int index) {
  DeviceInfo d;
  d.index = index;
  d.name = "NVIDIA H100 80GB HBM3";
  d.model = "h100-80gb-hbm3";
  d.backend = "cuda";
  d.cc_major = 9;
  d.cc_minor = 0;
  d.num_sms = 132;
  d.total_mem_bytes = int64_t{85} << 30;
  d.l2_bytes = 50 << 20;
  d.smem_per_block_optin = 232448;
  d.max_threads_per_block = 1024;
  d.sm_clock_mhz = 1980;
  d.mem_clock_mhz = 2619;
  d.driver_version = "13.0";
  d.nvrtc_version = "13.0";
  return d;
}

Measurement MakeMeasurement(int i, FailureClass failure) {
  Measurement m;
  m.gpu_model = "h100-80gb-hbm3";
  m.op = "gemm";
  m.dtype = "f16";
  m.shape = "M=4096,N=4096,K=4096";
  m.kernel_hash = "0123456789abcdef0123456789abcdef";
  m.config_id = "cfg-" + std::to_string(i);
  m.config.params = {{"BM", 128}, {"BN", 64}, {"BK", 32}, {"STAGES", 3 + i}};
  m.failure = failure;
  m.failure_message = failure == FailureClass::kNone ? "" : "error: ptxas ran out of registers";
  m.median_us = 123.25 + i;
  m.mean_us = 124.5;
  m.stdev_us = 0.75;
  m.min_us = 122.0;
  m.max_us = 130.125;
  m.ci95_us = 0.3;
  m.samples = 41;
  m.check_passed = failure == FailureClass::kNone;
  m.max_abs_error = 1e-3;
  m.mismatch_ratio = 0;
  m.resources = {128, 0, 98304, 0, 256, 0.5};
  m.throttled = i % 2 == 1;
  m.sm_clock_mhz = 1980;
  m.backend = "cuda";
  m.device_name = "NVIDIA H100 80GB HBM3";
  m.worker = "gpu-host-7:4242";
  m.driver_version = "13.0";
  m.nvrtc_version = "13.0";
  m.farm_version = "0.1.0";
  m.unix_time = 1767225600 + i;
  m.sweep_id = "6790a1b2-00ff";
  return m;
}

OpPackage Package() {
  return {{"op.toml", "[op]\nname = \"gemm\"\nsource = \"gemm.cu\"\n"},
          {"gemm.cu", "extern \"C\" __global__ void gemm(const half* A) { /* ... */ }\n"}};
}

Shape MakeShape(int64_t m, int64_t n, int64_t k) { return Shape{{{"M", m}, {"N", n}, {"K", k}}}; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int written = 0;
  auto write = [&](const std::string& name, Command cmd) {
    Envelope env;
    env.seq = 1000 + written;
    env.sender = "gpu-host-7:4242";
    env.command = std::move(cmd);
    const std::string bytes = EncodeEnvelope(env);
    std::ofstream(dir + "/seed-" + name, std::ios::binary) << bytes;
    ++written;
  };

  write("hello", Hello{"gpu-host-7:4242", "0.1.0", {Device(0), Device(1)}});
  write("hello_no_devices", Hello{"cpu-host:1", "0.1.0", {}});
  write("hello_ack", HelloAck{1000, 5});
  write("heartbeat", Heartbeat{});
  write("request_work", RequestWork{1});
  write("no_work", NoWork{200});

  WorkUnit unit;
  unit.sweep_id = "6790a1b2-00ff";
  unit.unit_id = 17;
  unit.attempt = 2;
  unit.device_index = 1;
  unit.op = "gemm";
  unit.op_package = Package();
  unit.dtype = "f16";
  unit.shapes = {MakeShape(4096, 4096, 4096), MakeShape(1024, 1024, 1024)};
  unit.configs = {Config{{{"BM", 128}, {"BN", 128}}}, Config{{{"BM", 64}, {"BN", 256}}}};
  unit.lease_seconds = 600;
  write("work_unit", unit);

  Results results;
  results.sweep_id = "6790a1b2-00ff";
  results.unit_id = 17;
  results.batch = 3;
  results.final = true;
  results.measurements = {MakeMeasurement(0, FailureClass::kNone),
                          MakeMeasurement(1, FailureClass::kCompileError),
                          MakeMeasurement(2, FailureClass::kWrongResult)};
  write("results", results);
  write("results_empty", Results{"6790a1b2-00ff", 18, 0, false, {}});

  write("results_ack", ResultsAck{"6790a1b2-00ff", 17, 3, 2});

  SweepSubmit submit;
  submit.name = "nightly-gemm";
  submit.ops = {"gemm"};
  submit.op_packages = {Package()};
  submit.dtypes = {"f16", "bf16"};
  submit.shapes = {MakeShape(4096, 4096, 4096), MakeShape(1024, 1024, 1024)};
  submit.gpu_models = {"*"};
  submit.configs_per_unit = 32;
  write("sweep_submit", submit);

  write("sweep_accepted", SweepAccepted{"6790a1b2-00ff"});
  write("sweep_status_request", SweepStatusRequest{""});
  write("sweep_cancel", SweepCancel{"0001-test"});
  write("store_read", StoreRead{ResultFilter{"h100-80gb-hbm3", "gemm", "f16", "", ""}, "", 0});
  write("store_chunk", StoreChunk{"6790a1b2-1", 0, 5, "tunef"});

  SweepProgress progress;
  progress.sweep_id = "6790a1b2-00ff";
  progress.name = "nightly-gemm";
  progress.state = "running";
  progress.units_total = 120;
  progress.units_done = 40;
  progress.pairs_total = 3000;
  progress.pairs_done = 1000;
  progress.pairs_failed = 12;
  progress.gpu_models = {"h100-80gb-hbm3", "h200-141gb"};
  progress.started_unix = 1767225600;
  write("sweep_status", SweepStatus{{progress, progress}, 12});

  write("error", ErrorReply{"unknown sweep 'x'"});
  write("disconnect", Disconnect{"coordinator stopping"});

  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
  return 0;
}
