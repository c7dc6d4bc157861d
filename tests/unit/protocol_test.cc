// The protocol codec: every command survives a round trip with its content,
// and hostile frames (truncated, mutated, oversized, wrong version, unknown
// command) are errors, never crashes.
#include "protocol/protocol.h"
#include "store/records.h"
#include "base/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <tuple>

namespace tune {
namespace {

auto Tie(const DeviceInfo& d) {
  return std::tie(d.index, d.name, d.model, d.backend, d.cc_major, d.cc_minor, d.num_sms,
                  d.total_mem_bytes, d.l2_bytes, d.smem_per_block_optin, d.max_threads_per_block,
                  d.sm_clock_mhz, d.mem_clock_mhz, d.driver_version, d.nvrtc_version);
}

auto Tie(const KernelResources& r) {
  return std::tie(r.registers, r.static_smem_bytes, r.dynamic_smem_bytes, r.local_bytes,
                  r.max_threads_per_block, r.occupancy);
}

auto Tie(const Measurement& m) {
  return std::tuple_cat(
      std::tie(m.gpu_model, m.op, m.dtype, m.shape, m.kernel_hash, m.config_id, m.config.params,
               m.failure, m.failure_message, m.median_us, m.mean_us, m.stdev_us, m.min_us,
               m.max_us, m.ci95_us, m.samples, m.check_passed, m.max_abs_error,
               m.mismatch_ratio),
      Tie(m.resources),
      std::tie(m.throttled, m.sm_clock_mhz, m.backend, m.device_name, m.worker, m.driver_version,
               m.nvrtc_version, m.farm_version, m.unix_time, m.sweep_id, m.pass, m.confirm_timing));
}

auto Tie(const SweepProgress& p) {
  return std::tie(p.sweep_id, p.name, p.state, p.units_total, p.units_done, p.pairs_total,
                  p.pairs_done, p.pairs_failed, p.gpu_models, p.started_unix, p.finished_unix, p.error,
                  p.waiting_for, p.expanding, p.failed_by_class, p.waits, p.skipped);
}

DeviceInfo MakeDevice(int index) {
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
  m.config_id = "00000000000000" + std::to_string(10 + i);
  m.config.params = {{"BM", 128}, {"BN", 64 + i}, {"BK", 32}, {"STAGES", -3}};
  m.failure = failure;
  m.failure_message = failure == FailureClass::kNone ? "" : "error: identifier \"x\" is undefined";
  m.median_us = 123.25 + i;
  m.mean_us = 124.5;
  m.stdev_us = 0.75;
  m.min_us = 122.0;
  m.max_us = 130.125;
  m.ci95_us = 0.3;
  m.samples = 41;
  m.check_passed = failure == FailureClass::kNone;
  m.max_abs_error = 1.5e-3;
  m.mismatch_ratio = 1e-6;
  m.resources = {168, 1024, 98304, 16, 256, 0.375};
  m.throttled = (i % 2) == 1;
  m.sm_clock_mhz = 1755;
  m.backend = "cuda";
  m.device_name = "NVIDIA H100 80GB HBM3";
  m.worker = "gpu-node-17:4242";
  m.driver_version = "580.65";
  m.nvrtc_version = "13.0";
  m.farm_version = "0.1.0";
  m.unix_time = 1763740000 + i;
  m.sweep_id = "nightly-7";
  m.pass = static_cast<Measurement::Pass>(i % 3);
  m.confirm_timing = (i % 3) == 1 ? ConfirmTiming::kBurst : ConfirmTiming::kSustained;
  return m;
}

OpPackage MakePackage() {
  OpPackage p;
  p["op.toml"] = "[op]\nname = \"gemm\"\n";
  // Sources travel as bytes: NUL and non-UTF-8 must survive unchanged.
  p["gemm.cu"] = std::string("extern \"C\" __global__ void gemm() {}\n") + std::string(1, '\0') +
                 "binary\xff";
  p["reference.cu"] = "// reference\n";
  return p;
}

Envelope Wrap(Command c, uint64_t seq = 7) {
  Envelope e;
  e.seq = seq;
  e.sender = "worker-a:123";
  e.command = std::move(c);
  return e;
}

Envelope RoundTrip(const Envelope& in) {
  const std::string frame = EncodeEnvelope(in);
  auto out = DecodeEnvelope(frame.data(), frame.size());
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return Envelope{};
  EXPECT_EQ(out->version, in.version);
  EXPECT_EQ(out->seq, in.seq);
  EXPECT_EQ(out->sender, in.sender);
  EXPECT_EQ(out->command.index(), in.command.index());
  EXPECT_STREQ(CommandName(out->command), CommandName(in.command));
  return std::move(out).value();
}

TEST(ProtocolTest, HelloRoundTrip) {
  Hello h{"gpu-node-17:4242", "0.1.0", {MakeDevice(0), MakeDevice(1)}};
  h.devices[1].name = "NVIDIA H200";
  h.devices[1].model = "h200";
  auto out = std::get<Hello>(RoundTrip(Wrap(h)).command);
  EXPECT_EQ(out.worker_name, h.worker_name);
  EXPECT_EQ(out.farm_version, h.farm_version);
  ASSERT_EQ(out.devices.size(), 2u);
  EXPECT_EQ(Tie(out.devices[0]), Tie(h.devices[0]));
  EXPECT_EQ(Tie(out.devices[1]), Tie(h.devices[1]));
}

TEST(ProtocolTest, SmallCommandsRoundTrip) {
  auto ack = std::get<HelloAck>(RoundTrip(Wrap(HelloAck{250, 7})).command);
  EXPECT_EQ(ack.heartbeat_ms, 250u);
  EXPECT_EQ(ack.liveness, 7u);

  RoundTrip(Wrap(Heartbeat{}, 0));

  EXPECT_EQ(std::get<RequestWork>(RoundTrip(Wrap(RequestWork{3})).command).device_index, 3);
  EXPECT_EQ(std::get<NoWork>(RoundTrip(Wrap(NoWork{1500})).command).retry_ms, 1500u);

  auto rack = std::get<ResultsAck>(RoundTrip(Wrap(ResultsAck{"s-1", 99, 4, 17, "not leased"})).command);
  EXPECT_EQ(rack.refused, "not leased");
  EXPECT_EQ(rack.sweep_id, "s-1");
  EXPECT_EQ(rack.unit_id, 99u);
  EXPECT_EQ(rack.batch, 4u);
  EXPECT_EQ(rack.stored, 17u);

  EXPECT_EQ(std::get<SweepAccepted>(RoundTrip(Wrap(SweepAccepted{"s-42"})).command).sweep_id, "s-42");
  EXPECT_EQ(std::get<SweepStatusRequest>(RoundTrip(Wrap(SweepStatusRequest{"s-43"})).command).sweep_id,
            "s-43");
  EXPECT_EQ(std::get<ErrorReply>(RoundTrip(Wrap(ErrorReply{"no such op: gemmm"})).command).message,
            "no such op: gemmm");
  EXPECT_EQ(std::get<Disconnect>(RoundTrip(Wrap(Disconnect{"shutting down"})).command).reason,
            "shutting down");
}

TEST(ProtocolTest, WorkUnitRoundTrip) {
  WorkUnit w;
  w.sweep_id = "nightly-7";
  w.unit_id = (uint64_t{1} << 40) + 5;
  w.attempt = 2;
  w.device_index = 1;
  w.op = "gemm";
  w.op_package = MakePackage();
  w.dtype = "bf16";
  w.shapes = {Shape{{{"M", 4096}, {"N", 4096}, {"K", 4096}}}, Shape{{{"M", 1}, {"N", 8}, {"K", 1 << 20}}}};
  w.configs = {Config{{{"BM", 128}, {"BN", 256}}}, Config{{{"BM", 64}, {"BN", 64}}}, Config{}};
  w.lease_seconds = 90.5;
  w.confirm_seconds = 8;
  w.confirm_timing = ConfirmTiming::kBurst;
  w.refine_best_us = 12.5;
  w.screen_only = true;
  w.reusable = {{w.configs[0].Id(), std::string(32, 'a')}, {w.configs[0].Id(), std::string(32, 'b')}};
  w.energy_seconds = 0.25;
  auto out = std::get<WorkUnit>(RoundTrip(Wrap(w)).command);
  EXPECT_EQ(out.sweep_id, w.sweep_id);
  EXPECT_EQ(out.unit_id, w.unit_id);
  EXPECT_EQ(out.attempt, w.attempt);
  EXPECT_EQ(out.device_index, w.device_index);
  EXPECT_EQ(out.op, w.op);
  EXPECT_EQ(out.op_package, w.op_package);  // binary contents byte for byte
  EXPECT_EQ(out.dtype, w.dtype);
  ASSERT_EQ(out.shapes.size(), 2u);
  EXPECT_EQ(out.shapes[0].dims, w.shapes[0].dims);
  EXPECT_EQ(out.shapes[1].dims, w.shapes[1].dims);
  ASSERT_EQ(out.configs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out.configs[i].params, w.configs[i].params);
  EXPECT_EQ(out.lease_seconds, w.lease_seconds);
  EXPECT_EQ(out.confirm_seconds, 8);
  EXPECT_EQ(out.confirm_timing, ConfirmTiming::kBurst);
  EXPECT_EQ(out.refine_best_us, 12.5);
  EXPECT_TRUE(out.screen_only);
  EXPECT_EQ(out.reusable, w.reusable);
  EXPECT_EQ(out.energy_seconds, 0.25);
}

TEST(ProtocolTest, ResultsRoundTripEveryFailureClass) {
  Results r;
  r.sweep_id = "nightly-7";
  r.unit_id = 12;
  r.batch = 3;
  r.final = true;
  const FailureClass classes[] = {FailureClass::kNone,        FailureClass::kCompileError,
                                  FailureClass::kResources,   FailureClass::kLaunchError,
                                  FailureClass::kCrash,       FailureClass::kTimeout,
                                  FailureClass::kWrongResult, FailureClass::kNan,
                                  FailureClass::kSkipped};
  int i = 0;
  for (FailureClass c : classes) r.measurements.push_back(MakeMeasurement(i++, c));
  r.reused = {{"BM=64", std::string(32, 'c')}};
  auto out = std::get<Results>(RoundTrip(Wrap(r)).command);
  EXPECT_EQ(out.reused, r.reused);
  EXPECT_EQ(out.sweep_id, r.sweep_id);
  EXPECT_EQ(out.unit_id, r.unit_id);
  EXPECT_EQ(out.batch, r.batch);
  EXPECT_TRUE(out.final);
  ASSERT_EQ(out.measurements.size(), r.measurements.size());
  for (size_t k = 0; k < r.measurements.size(); ++k) {
    EXPECT_EQ(Tie(out.measurements[k]), Tie(r.measurements[k])) << "measurement " << k;
  }
}

// A unit's pipeline figures travel with its final batch and a sweep's sum
// with its progress; the coordinator refuses figures no unit could have.
TEST(ProtocolTest, PipelineFiguresRoundTripAndAreJudgedAgainstTheUnit) {
  Results r;
  r.sweep_id = "s";
  r.unit_id = 4;
  r.final = true;
  r.pipeline = {1, 5, 2, 1, 12.5, 3.25, 7.5, 11.0, 16, 0};
  const auto out = std::get<Results>(RoundTrip(Wrap(r)).command);
  EXPECT_EQ(out.pipeline.units, 1u);
  EXPECT_EQ(out.pipeline.compiled, 5u);
  EXPECT_EQ(out.pipeline.fetched, 2u);
  EXPECT_EQ(out.pipeline.cached, 1u);
  EXPECT_EQ(out.pipeline.compile_seconds, 12.5);
  EXPECT_EQ(out.pipeline.device_wait_seconds, 3.25);
  EXPECT_EQ(out.pipeline.measure_seconds, 7.5);
  EXPECT_EQ(out.pipeline.unit_seconds, 11.0);
  EXPECT_EQ(out.pipeline.compile_threads, 16u);
  EXPECT_EQ(r.pipeline.Invalid(8, 1e6), "");
  EXPECT_NE(r.pipeline.Invalid(7, 1e6).find("exceed the unit's 7 configs"), std::string::npos);
  PipelineFigures bad = r.pipeline;
  bad.measure_seconds = std::nan("");
  EXPECT_NE(bad.Invalid(8, 1e6).find("pipeline.measureSeconds"), std::string::npos);
  bad = r.pipeline;
  bad.compile_seconds = -1;
  EXPECT_NE(bad.Invalid(8, 1e6).find("pipeline.compileSeconds"), std::string::npos);
  bad = r.pipeline;
  bad.units = 2;
  EXPECT_NE(bad.Invalid(8, 1e6), "");
  bad = r.pipeline;
  bad.compiled = UINT64_MAX;  // no wrap-around past the sum's check
  EXPECT_NE(bad.Invalid(8, 1e6), "");
  bad = r.pipeline;
  bad.compile_threads = kMaxCompileThreads + 1;
  EXPECT_NE(bad.Invalid(8, 1e6).find("pipeline.compileThreads"), std::string::npos);
  bad = r.pipeline;
  bad.wall_seconds = 5;  // a sweep's figure, never a unit's
  EXPECT_NE(bad.Invalid(8, 1e6).find("pipeline.wallSeconds"), std::string::npos);

  SweepStatus s;
  SweepProgress p;
  p.sweep_id = "s";
  p.pipeline = r.pipeline;
  p.pipeline += r.pipeline;
  p.pipeline.wall_seconds = 20;
  p.in_flight = 48;
  p.in_flight_depth = 64;
  s.sweeps.push_back(p);
  const auto back = std::get<SweepStatus>(RoundTrip(Wrap(s)).command);
  ASSERT_EQ(back.sweeps.size(), 1u);
  EXPECT_EQ(back.sweeps[0].pipeline.units, 2u);
  EXPECT_EQ(back.sweeps[0].pipeline.compiled, 10u);
  EXPECT_EQ(back.sweeps[0].pipeline.compile_threads, 16u) << "not summed by +=";
  EXPECT_EQ(back.sweeps[0].pipeline.wall_seconds, 20.0);
  EXPECT_EQ(back.sweeps[0].in_flight, 48u);
  EXPECT_EQ(back.sweeps[0].in_flight_depth, 64u);
}

TEST(ProtocolTest, PeekResultsReadsTheHeadOnly) {
  Results r;
  r.sweep_id = "nightly-7";
  r.unit_id = 12;
  r.batch = 3;
  r.final = true;
  for (int i = 0; i < 64; ++i) r.measurements.push_back(MakeMeasurement(i, FailureClass::kNone));
  const std::string frame = EncodeEnvelope(Wrap(r));
  auto head = PeekResults(frame.data(), frame.size());
  ASSERT_TRUE(head.ok()) << head.status().message();
  ASSERT_TRUE(head->has_value());
  EXPECT_EQ((*head)->sweep_id, "nightly-7");
  EXPECT_EQ((*head)->unit_id, 12u);
  EXPECT_EQ((*head)->batch, 3u);
  EXPECT_TRUE((*head)->final);

  const std::string other = EncodeEnvelope(Wrap(RequestWork{1}));
  auto none = PeekResults(other.data(), other.size());
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());

  Envelope newer = Wrap(r);
  newer.version = kProtocolVersion + 1;
  const std::string newer_frame = EncodeEnvelope(newer);
  EXPECT_FALSE(PeekResults(newer_frame.data(), newer_frame.size()).ok());
  EXPECT_FALSE(PeekResults(frame.data(), frame.size() - 8).ok());
  EXPECT_FALSE(PeekResults(nullptr, 0).ok());
}

TEST(ProtocolTest, SweepSubmitRoundTrip) {
  SweepSubmit s;
  s.name = "nightly-gemm";
  s.ops = {"gemm", "softmax"};
  s.op_packages = {MakePackage(), OpPackage{{"op.toml", "[op]\nname=\"softmax\"\n"}}};
  s.dtypes = {"f16", "bf16"};
  s.shapes = {Shape{{{"M", 4096}, {"N", 4096}, {"K", 4096}}}};
  s.gpu_models = {"*"};
  s.configs_per_unit = 64;
  auto out = std::get<SweepSubmit>(RoundTrip(Wrap(s)).command);
  EXPECT_EQ(out.name, s.name);
  EXPECT_EQ(out.ops, s.ops);
  EXPECT_EQ(out.op_packages, s.op_packages);
  EXPECT_EQ(out.dtypes, s.dtypes);
  ASSERT_EQ(out.shapes.size(), 1u);
  EXPECT_EQ(out.shapes[0].dims, s.shapes[0].dims);
  EXPECT_EQ(out.gpu_models, s.gpu_models);
  EXPECT_EQ(out.configs_per_unit, 64u);
  // Without a confirm timing (what an older client sends): sustained.
  EXPECT_EQ(out.confirm_timing, ConfirmTiming::kSustained);
  EXPECT_FALSE(out.refine_pass);  // and one pass
  s.refine_pass = true;
  s.confirm_top = 4;
  s.confirm_seconds = 2.5;
  s.confirm_timing = ConfirmTiming::kBurst;
  s.retry = {"timeout", "crash"};
  out = std::get<SweepSubmit>(RoundTrip(Wrap(s)).command);
  EXPECT_EQ(out.retry, s.retry);
  EXPECT_EQ(out.confirm_top, 4u);
  EXPECT_EQ(out.confirm_seconds, 2.5);
  EXPECT_EQ(out.confirm_timing, ConfirmTiming::kBurst);
  EXPECT_TRUE(out.refine_pass);
  EXPECT_FALSE(out.retime);  // what an older client's message reads as
  s.retime = true;
  EXPECT_TRUE(std::get<SweepSubmit>(RoundTrip(Wrap(s)).command).retime);
  EXPECT_EQ(out.priority, kDefaultSweepPriority);
  // The wire's default is 50 (what an older client's message reads as):
  // 0, the lowest, must still come through as 0.
  for (uint32_t p : {0u, 80u, 100u}) {
    s.priority = p;
    EXPECT_EQ(std::get<SweepSubmit>(RoundTrip(Wrap(s)).command).priority, p);
  }
  EXPECT_EQ(out.objective, "time");
  s.objective = "edp";
  EXPECT_EQ(std::get<SweepSubmit>(RoundTrip(Wrap(s)).command).objective, "edp");
  s.objective = "";  // what an older client's message reads as
  EXPECT_EQ(std::get<SweepSubmit>(RoundTrip(Wrap(s)).command).objective, "time");
}

TEST(ProtocolTest, SweepStatusRoundTrip) {
  SweepStatus s;
  s.workers = 17;
  SweepProgress p;
  p.sweep_id = "s-1";
  p.name = "nightly";
  p.state = "running";
  p.units_total = 1000;
  p.units_done = 250;
  p.pairs_total = 1u << 20;
  p.pairs_done = 12345;
  p.pairs_failed = 67;
  p.gpu_models = {"h100-80gb-hbm3", "h200"};
  p.started_unix = 1763740000;
  p.finished_unix = 0;
  p.error = "op 'x' has 2000000 legal configs";
  p.waiting_for = {"a100"};
  p.expanding = {"h200"};
  p.waits = {"a100: no live worker has it", "h200: 12 pairs queued, no device has taken work for 75 s"};
  p.skipped = {"l40s: no device took work for 300 s with 40 pairs queued; those pairs are dropped"};
  p.failed_by_class = {{"compile_error", 60}, {"timeout", 7}};
  s.sweeps = {p, SweepProgress{}};
  DeviceInfo dev;
  dev.model = "h100-80gb-hbm3";
  dev.cc_major = 9;
  dev.smem_per_block_optin = 232448;
  s.devices = {dev};
  auto out = std::get<SweepStatus>(RoundTrip(Wrap(s)).command);
  EXPECT_EQ(out.workers, 17u);
  ASSERT_EQ(out.devices.size(), 1u);
  EXPECT_EQ(out.devices[0].model, "h100-80gb-hbm3");
  EXPECT_EQ(out.devices[0].smem_per_block_optin, 232448);
  ASSERT_EQ(out.sweeps.size(), 2u);
  EXPECT_EQ(Tie(out.sweeps[0]), Tie(p));
  const SweepProgress empty;
  EXPECT_EQ(Tie(out.sweeps[1]), Tie(empty));
}

// Every Text field of an envelope is checked as UTF-8 and for its length;
// a stored record is read as it is (it may predate the check).
TEST(ProtocolTest, TextThatIsNotUtf8OrTooLongIsRefusedWithTheFieldNamed) {
  const std::string bad = "a\xc3" "(b";  // a lead byte without its continuation
  auto refused = [](const Envelope& env, const char* field) {
    const std::string frame = EncodeEnvelope(env);
    auto out = DecodeEnvelope(frame.data(), frame.size());
    ASSERT_FALSE(out.ok()) << field;
    EXPECT_NE(out.status().message().find(field), std::string::npos) << out.status().message();
  };
  refused(Wrap(Hello{bad, "1", {}}), "workerName is not valid UTF-8");
  DeviceInfo d;
  d.model = bad;
  refused(Wrap(Hello{"w", "1", {d}}), "model is not valid UTF-8");
  refused(Wrap(SweepStatusRequest{bad}), "sweepId is not valid UTF-8");
  refused(Wrap(Disconnect{bad}), "reason is not valid UTF-8");
  Results r{"s", 1, 0, false, {MakeMeasurement(0, FailureClass::kNone)}, {}, {}, {}, {}};
  r.measurements[0].worker = bad;
  refused(Wrap(r), "worker is not valid UTF-8");
  Envelope env = Wrap(Heartbeat{});
  env.sender = bad;
  refused(env, "sender is not valid UTF-8");
  refused(Wrap(Hello{std::string(kMaxNameBytes + 1, 'x'), "1", {}}), "workerName is 4097 bytes");
  // Long texts where they are meant to be: a compile log, a reason.
  Results log{"s", 1, 0, false, {MakeMeasurement(0, FailureClass::kCompileError)}, {}, {}, {}, {}};
  log.measurements[0].failure_message = std::string(100000, 'e');
  const std::string frame = EncodeEnvelope(Wrap(log));
  EXPECT_TRUE(DecodeEnvelope(frame.data(), frame.size()).ok());
  // A record in a store is read whatever its bytes.
  Measurement m = MakeMeasurement(1, FailureClass::kNone);
  m.worker = bad;
  const std::string bytes = EncodeMeasurement(m);
  auto out = DecodeMeasurement(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->worker, bad);
}

TEST(ProtocolTest, LeaseRecordRoundTrip) {
  LeaseRecord rec;
  rec.unit.sweep_id = "s-1";
  rec.unit.unit_id = (7ull << 32) | 5;
  rec.unit.op = "gemm";
  rec.unit.dtype = "f16";
  rec.unit.shapes = {Shape{{{"M", 64}}}};
  rec.unit.configs = {Config{{{"BM", 64}}}, Config{{{"BM", 128}}}};
  rec.unit.refine_best_us = 12.5;
  rec.gpu_model = "h100";
  rec.lessees = {"host:1", "rq2f7?zk}6G:K5kYaF5ks4m%O&eL#@8-B4u7K^l="};
  const std::string bytes = EncodeLeaseRecord(rec);
  auto out = DecodeLeaseRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->unit.unit_id, rec.unit.unit_id);
  EXPECT_EQ(out->unit.configs.size(), 2u);
  EXPECT_EQ(out->unit.configs[1].Canonical(), "BM=128");
  EXPECT_TRUE(out->unit.refine());
  EXPECT_EQ(out->gpu_model, "h100");
  EXPECT_EQ(out->lessees, rec.lessees);
  EXPECT_FALSE(DecodeLeaseRecord(bytes.data(), bytes.size() - 8).ok());
}

TEST(ProtocolTest, CommandNames) {
  EXPECT_STREQ(CommandName(Command{Hello{}}), "hello");
  EXPECT_STREQ(CommandName(Command{WorkUnit{}}), "work_unit");
  EXPECT_STREQ(CommandName(Command{SweepStatusRequest{}}), "sweep_status_request");
  EXPECT_STREQ(CommandName(Command{Disconnect{}}), "disconnect");
}

TEST(ProtocolTest, MeasurementRecordRoundTrip) {
  const Measurement m = MakeMeasurement(3, FailureClass::kWrongResult);
  const std::string bytes = EncodeMeasurement(m);
  auto out = DecodeMeasurement(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Tie(*out), Tie(m));
  // A cut record is corrupt (its code says so, for callers that branch).
  EXPECT_EQ(DecodeMeasurement(bytes.data(), bytes.size() - 8).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(DecodeMeasurement(bytes.data(), 0).status().code(), StatusCode::kCorruption);
  // How its samples met the L2 travels with it; a row of before the field is cold.
  Measurement hot = m;
  hot.timing = L2Timing::kHot;
  const std::string hot_bytes = EncodeMeasurement(hot);
  EXPECT_EQ(DecodeMeasurement(hot_bytes.data(), hot_bytes.size())->timing, L2Timing::kHot);
  EXPECT_EQ(out->timing, L2Timing::kCold);
}

TEST(ProtocolTest, CategoricalParamsRoundTripAndAForgedNumberIsRefused) {
  Measurement m = MakeMeasurement(1, FailureClass::kNone);
  m.config.params = {{"BM", 128}, {"SCHEDULE", ParamValue::String("stream_k")}, {"TMA", ParamValue::Bool(true)}};
  const std::string bytes = EncodeMeasurement(m);
  auto out = DecodeMeasurement(bytes.data(), bytes.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->config.params, m.config.params);
  EXPECT_EQ(out->config.Canonical(), "BM=128,SCHEDULE=stream_k,TMA=true");
  // The number beside a string is its code; a record whose number says
  // otherwise was not written by the farm.
  const int64_t code = CategoricalCode("stream_k");
  char le[8];
  std::memcpy(le, &code, 8);
  const size_t at = bytes.find(std::string(le, 8));
  ASSERT_NE(at, std::string::npos);
  std::string forged = bytes;
  forged[at] ^= 1;
  auto bad = DecodeMeasurement(forged.data(), forged.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("param SCHEDULE: its number is not its text's code"), std::string::npos)
      << bad.status().message();
}

TEST(ProtocolTest, DecodesMisalignedFrames) {
  const std::string frame = EncodeEnvelope(Wrap(Hello{"w", "v", {MakeDevice(0)}}));
  std::string shifted(frame.size() + 1, '\0');
  std::memcpy(shifted.data() + 1, frame.data(), frame.size());
  auto out = DecodeEnvelope(shifted.data() + 1, frame.size());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(std::get<Hello>(out->command).devices.at(0).num_sms, 132);
}

TEST(ProtocolTest, RejectsWrongVersion) {
  Envelope e = Wrap(Heartbeat{});
  e.version = kProtocolVersion + 1;
  const std::string frame = EncodeEnvelope(e);
  auto out = DecodeEnvelope(frame.data(), frame.size());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("version"), std::string::npos) << out.status().message();
}

// Frame layout of a single-segment message: 8-byte segment table, root
// pointer, then the Envelope's data section (version:UInt16, union
// discriminant:UInt16, ...). Rewriting the discriminant stands in for a
// command from a newer peer.
TEST(ProtocolTest, RejectsUnknownAndUnsetCommand) {
  std::string frame = EncodeEnvelope(Wrap(Heartbeat{}));
  ASSERT_GE(frame.size(), 24u);
  uint16_t version = 0;
  std::memcpy(&version, frame.data() + 16, 2);
  ASSERT_EQ(version, kProtocolVersion) << "frame layout assumption broken";

  const uint16_t unknown = 99;
  std::memcpy(frame.data() + 18, &unknown, 2);
  auto out = DecodeEnvelope(frame.data(), frame.size());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("unknown command"), std::string::npos) << out.status().message();

  const uint16_t unset = 0;
  std::memcpy(frame.data() + 18, &unset, 2);
  out = DecodeEnvelope(frame.data(), frame.size());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("no command"), std::string::npos) << out.status().message();
}

TEST(ProtocolTest, RejectsEmptyOddAndOversizedFrames) {
  EXPECT_FALSE(DecodeEnvelope(nullptr, 0).ok());
  EXPECT_FALSE(DecodeEnvelope("", 0).ok());
  const std::string frame = EncodeEnvelope(Wrap(Heartbeat{}));
  std::string odd = frame + "x";
  EXPECT_FALSE(DecodeEnvelope(odd.data(), odd.size()).ok());

  std::string big(kMaxFrameBytes + 8, '\0');
  std::memcpy(big.data(), frame.data(), frame.size());
  auto out = DecodeEnvelope(big.data(), big.size());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("exceeds"), std::string::npos) << out.status().message();
}

TEST(ProtocolTest, RejectsTrailingBytes) {
  std::string frame = EncodeEnvelope(Wrap(Heartbeat{}));
  frame.append(8, '\0');
  EXPECT_FALSE(DecodeEnvelope(frame.data(), frame.size()).ok());
}

// A list of zero-sized structs costs the sender one tag word however long
// it claims to be; the decoder must refuse it before building a C++ object
// per element. Hand-built frame: Envelope{version 1, results: Results{
// measurements: composite list of N empty structs}}, padded so that the
// traversal limit alone would let it through.
TEST(ProtocolTest, RejectsListsThatExpandBeyondTheFrame) {
  constexpr uint64_t kPadWords = 16384;
  constexpr uint64_t kElements = 60000;
  const uint64_t words[] = {
      (2ull << 32) | (2ull << 48),   // root: struct, 2 data words, 2 pointers
      1 | (7ull << 16),              // version 1, command = results (7)
      0,                             // seq
      0,                             // sender: null
      (3ull << 32) | (2ull << 48),   // results: struct at next word, 3 data, 2 pointers
      0, 0, 0,                       // unitId, batch, final
      0,                             // sweepId: null
      1 | (7ull << 32),              // measurements: composite list, 0 content words
      kElements << 2,                // tag: N elements of 0 data / 0 pointers
  };
  const uint64_t segment_words = std::size(words) + kPadWords;
  std::string frame(8 + segment_words * 8, '\0');
  const uint32_t table[2] = {0, static_cast<uint32_t>(segment_words)};
  std::memcpy(frame.data(), table, 8);
  std::memcpy(frame.data() + 8, words, sizeof(words));
  auto out = DecodeEnvelope(frame.data(), frame.size());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("memory"), std::string::npos) << out.status().message();
}

Envelope RichEnvelope() {
  Results r;
  r.sweep_id = "nightly-7";
  r.unit_id = 12;
  for (int i = 0; i < 3; ++i) r.measurements.push_back(MakeMeasurement(i, FailureClass::kNone));
  return Wrap(r);
}

TEST(ProtocolTest, EveryTruncationIsAnError) {
  for (const Envelope& e : {RichEnvelope(), Wrap(Heartbeat{}), Wrap(Hello{"w", "v", {MakeDevice(0)}})}) {
    const std::string frame = EncodeEnvelope(e);
    for (size_t n = 0; n < frame.size(); ++n) {
      EXPECT_FALSE(DecodeEnvelope(frame.data(), n).ok()) << "prefix of " << n << " bytes decoded";
    }
  }
}

// Not a substitute for the libFuzzer target, but it runs on every build:
// mutated frames must decode or fail cleanly, never crash or hang.
TEST(ProtocolTest, RandomMutationsNeverCrash) {
  std::mt19937_64 rng(20251121);
  const std::vector<std::string> seeds = {
      EncodeEnvelope(RichEnvelope()),
      EncodeEnvelope(Wrap(Hello{"w", "v", {MakeDevice(0), MakeDevice(1)}})),
  };
  int decoded = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    std::string frame = seeds[iter % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits && !frame.empty(); ++k) {
      const size_t pos = rng() % frame.size();
      switch (rng() % 6) {
        case 0: frame[pos] ^= static_cast<char>(1u << (rng() % 8)); break;
        case 1: frame[pos] = static_cast<char>(rng()); break;
        case 2: {  // a whole word: hits pointers and list sizes at once
          const size_t w = pos & ~size_t{7};
          for (size_t b = w; b < w + 8 && b < frame.size(); ++b) frame[b] = static_cast<char>(rng());
          break;
        }
        case 3: frame.resize(pos); break;
        case 4: frame.insert(pos, std::string(8 * (1 + rng() % 4), static_cast<char>(rng()))); break;
        case 5: frame[pos] = static_cast<char>(0xff); break;
      }
    }
    auto out = DecodeEnvelope(frame.data(), frame.size());
    if (out.ok()) {
      ++decoded;
      // What decodes must re-encode: a decoded envelope is fully valid C++.
      EXPECT_FALSE(EncodeEnvelope(*out).empty());
    } else {
      EXPECT_FALSE(out.status().message().empty());
    }
  }
  // Many single-bit flips land in payload bytes and still decode; if none
  // did, the mutator would only be testing the size check.
  EXPECT_GT(decoded, 0);
}

TEST(ProtocolTest, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 10000; ++iter) {
    const size_t words = rng() % 64;
    std::string frame(words * 8 + (iter % 5 == 0 ? rng() % 8 : 0), '\0');
    for (char& c : frame) c = static_cast<char>(rng());
    // A plausible segment table makes the reader go further than the header.
    if (frame.size() >= 8 && iter % 2 == 0) {
      const uint32_t zero = 0, size = static_cast<uint32_t>(words ? words - 1 : 0);
      std::memcpy(frame.data(), &zero, 4);
      std::memcpy(frame.data() + 4, &size, 4);
    }
    auto out = DecodeEnvelope(frame.data(), frame.size());
    if (!out.ok()) {
      EXPECT_FALSE(out.status().message().empty());
    }
  }
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// Remote reads: a StoreRead's filter and paging, a StoreChunk's bytes; a
// chunk whose bytes run past its export's size, or over the piece bound, is
// refused at decode.
TEST(ProtocolTest, StoreReadsAndTheirPiecesRoundTripAndLiesAreRefused) {
  StoreRead read{ResultFilter{"h100-80gb-hbm3", "gemm", "f16", "M=1,N=2,K=3", ""}, "7-123", 16u << 20};
  auto r = std::get<StoreRead>(RoundTrip(Wrap(read)).command);
  EXPECT_EQ(r.filter.gpu_model, "h100-80gb-hbm3");
  EXPECT_EQ(r.filter.op, "gemm");
  EXPECT_EQ(r.filter.shape, "M=1,N=2,K=3");
  EXPECT_EQ(r.export_id, "7-123");
  EXPECT_EQ(r.offset, 16u << 20);
  StoreChunk chunk{"7-123", 10, 15, std::string("\0\1\2\3\4", 5)};
  auto c = std::get<StoreChunk>(RoundTrip(Wrap(chunk)).command);
  EXPECT_EQ(c.data, chunk.data);
  EXPECT_EQ(c.total_bytes, 15u);
  for (StoreChunk bad : {StoreChunk{"x", 12, 15, "abcde"}, StoreChunk{"x", 20, 15, ""},
                         StoreChunk{"x", 0, ~uint64_t{0}, std::string(kStoreChunkBytes + 1, 'a')}}) {
    Envelope env;
    env.command = bad;
    const std::string frame = EncodeEnvelope(env);
    EXPECT_FALSE(DecodeEnvelope(frame.data(), frame.size()).ok()) << bad.offset;
  }
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// A sweep's config list (SweepSubmit::configs) crosses the wire whole, and
// a message without one (an older client's) has none.
TEST(ProtocolTest, SweepSubmitCarriesItsConfigList) {
  SweepSubmit s;
  s.name = "listed";
  s.ops = {"gemm"};
  s.op_packages = {MakePackage()};
  s.dtypes = {"f16"};
  s.shapes = {Shape{{{"M", 64}, {"N", 64}, {"K", 64}}}};
  s.gpu_models = {"*"};
  EXPECT_TRUE(std::get<SweepSubmit>(RoundTrip(Wrap(s)).command).configs.empty());
  s.configs = {Config{{{"BM", 128}, {"BN", 256}}},
               Config{{{"BM", 64}, {"SCHEDULE", ParamValue::String("stream_k")}, {"TMA", ParamValue::Bool(true)}}}};
  const auto out = std::get<SweepSubmit>(RoundTrip(Wrap(s)).command);
  ASSERT_EQ(out.configs.size(), 2u);
  EXPECT_EQ(out.configs[0].params, s.configs[0].params);
  EXPECT_EQ(out.configs[1].params, s.configs[1].params);
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// A builder's hello, its requests, the work it is handed and the images it
// sends back cross the wire whole; counts past their bounds, a builder
// hello with devices and a request for no configs are refused at the door.
TEST(ProtocolTest, BuilderCommandsRoundTripAndTheirBoundsAreChecked) {
  Hello hello{"builder-1:77", "0.1.0", {}, {"sm_90a", "sm_100a"}, "13.0"};
  auto h = std::get<Hello>(RoundTrip(Wrap(hello)).command);
  EXPECT_EQ(h.builder_archs, hello.builder_archs);
  EXPECT_EQ(h.builder_toolchain, "13.0");
  EXPECT_TRUE(h.builder());
  EXPECT_FALSE(std::get<Hello>(RoundTrip(Wrap(Hello{"w", "v", {MakeDevice(0)}})).command).builder());

  EXPECT_EQ(std::get<BuildRequest>(RoundTrip(Wrap(BuildRequest{12})).command).max_configs, 12u);

  BuildWork work;
  work.sweep_id = "s-9";
  work.work_id = 41;
  work.op = "gemm";
  work.op_package = MakePackage();
  work.dtype = "f16";
  work.arch = "sm_90a";
  work.kernel_hash = std::string(32, 'c');
  for (int i = 0; i < 3; ++i) {
    Config c;
    c.params = {{"BM", 64 << i}, {"BN", 128}};
    work.configs.push_back(c);
  }
  auto w = std::get<BuildWork>(RoundTrip(Wrap(work)).command);
  EXPECT_EQ(w.sweep_id, "s-9");
  EXPECT_EQ(w.work_id, 41u);
  EXPECT_EQ(w.op, "gemm");
  EXPECT_EQ(w.op_package, work.op_package);
  EXPECT_EQ(w.dtype, "f16");
  EXPECT_EQ(w.arch, "sm_90a");
  EXPECT_EQ(w.kernel_hash, work.kernel_hash);
  ASSERT_EQ(w.configs.size(), 3u);
  EXPECT_EQ(w.configs[2].Id(), work.configs[2].Id());

  BuiltImages built;
  built.work_id = 41;
  built.failed = 1;
  KernelImage k;
  k.kernel_hash = work.kernel_hash;
  k.config_id = work.configs[0].Id();
  k.dtype = "f16";
  k.arch = "sm_90a";
  k.image = std::string("\x7f" "ELF\0\1", 6);
  k.sha256 = Sha256Hex(k.image);
  k.witnesses = {"key:forged"};
  built.images = {k, k};
  auto b = std::get<BuiltImages>(RoundTrip(Wrap(built)).command);
  EXPECT_EQ(b.work_id, 41u);
  EXPECT_EQ(b.failed, 1u);
  ASSERT_EQ(b.images.size(), 2u);
  EXPECT_EQ(b.images[0].image, k.image);
  EXPECT_EQ(b.images[0].sha256, k.sha256);
  EXPECT_TRUE(b.images[0].witnesses.empty()) << "who vouches is the coordinator's to record";

  auto refused = [](const Command& c, const std::string& field) {
    const std::string frame = EncodeEnvelope(Wrap(c));
    auto out = DecodeEnvelope(frame.data(), frame.size());
    ASSERT_FALSE(out.ok()) << field;
    EXPECT_NE(out.status().message().find(field), std::string::npos) << out.status().message();
  };
  refused(BuildRequest{0}, "maxConfigs");
  refused(BuildRequest{uint32_t(kMaxBuildConfigs + 1)}, "maxConfigs");
  BuildWork many = work;
  many.configs.assign(kMaxBuildConfigs + 1, work.configs[0]);
  refused(many, "configs");
  BuiltImages flood = built;
  flood.images.assign(kMaxBuildConfigs + 1, k);
  refused(flood, "images");
  BuiltImages lies = built;
  lies.failed = kMaxBuildConfigs + 1;
  refused(lies, "failed");
  refused(Hello{"b", "v", {MakeDevice(0)}, {"sm_90"}, "13.0"}, "builder");
  refused(Hello{"b", "v", {}, std::vector<std::string>(kMaxBuilderArchs + 1, "sm_90"), "13.0"}, "builderArchs");
  refused(Hello{"b", "v", {}, {"sm_90\xff"}, "13.0"}, "builderArchs");
}

}  // namespace
}  // namespace tune
