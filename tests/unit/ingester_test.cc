// Ingester: Results frames stored off the socket loop, against a real
// ResultStore in a temporary directory.
#include "ingester.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "opspec/op_definition.h"
#include "support/cubin.h"
#include <poll.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

namespace tune {
namespace {

namespace fs = std::filesystem;

Config Cfg(int64_t bm) { return Config{{{"BM", bm}, {"STAGES", 2}}}; }

Measurement Row(const std::string& gpu, int64_t bm, bool passed = true) {
  Measurement m;
  m.gpu_model = gpu;
  m.op = "gemm";
  m.dtype = "f16";
  m.shape = "N=1024";
  m.kernel_hash = "kh";
  m.config = Cfg(bm);
  m.config_id = m.config.Id();
  m.backend = "cuda";
  m.check_passed = passed;
  m.failure = passed ? FailureClass::kNone : FailureClass::kWrongResult;
  m.samples = passed ? 5 : 0;
  m.median_us = m.mean_us = m.min_us = m.max_us = passed ? 10 : 0;
  return m;
}

zmq::message_t Frame(uint64_t batch, std::vector<Measurement> rows, bool final = false) {
  Envelope env;
  env.sender = "w";
  env.command = Results{"s1", 7, batch, final, std::move(rows), {}, {}, {}, {}};
  const std::string bytes = EncodeEnvelope(env);
  return zmq::message_t(bytes.data(), bytes.size());
}

// Unit 7 of sweep s1: gemm/f16 on h100, shape N=1024, configs BM=64..256.
std::shared_ptr<LeasedUnit> Leased() {
  auto u = std::make_shared<LeasedUnit>();
  u->sweep_id = "s1";
  u->op = "gemm";
  u->dtype = "f16";
  u->gpu_model = "h100";
  u->shape = "N=1024";
  for (int64_t bm : {64, 128, 256}) u->configs.emplace(Cfg(bm).Id(), Cfg(bm));
  return u;
}

IngestJob Job(zmq::message_t frame) {
  IngestJob job;
  job.identity = "id-1";
  job.worker = "host:1";
  job.unit = Leased();
  job.kernel_hashes = {"kh"};
  job.backends = {"cuda"};
  job.archs = {"sm_90", "sm_90a"};
  job.kernel_entries = {"gemm"};
  // As the coordinator does: the head of a frame that peeks fine.
  auto head = PeekResults(frame.data(), frame.size());
  if (head.ok() && head->has_value()) job.head = **head;
  job.frame = std::move(frame);
  return job;
}

class IngesterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "ingester_test.XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    auto store = ResultStore::Open(dir_ + "/db");
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
    ingester_ = std::make_unique<Ingester>(store_.get());
    ASSERT_TRUE(ingester_->Start().ok());
  }
  void TearDown() override {
    ingester_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Waits (as the coordinator's loop does, on wake_fd) for n outcomes.
  std::vector<IngestOutcome> Take(size_t n) {
    std::vector<IngestOutcome> all;
    while (all.size() < n) {
      pollfd p{ingester_->wake_fd(), POLLIN, 0};
      if (poll(&p, 1, 10000) != 1) break;
      for (auto& o : ingester_->TakeOutcomes()) all.push_back(std::move(o));
    }
    return all;
  }

  std::string dir_;
  std::unique_ptr<ResultStore> store_;
  std::unique_ptr<Ingester> ingester_;
};

TEST_F(IngesterTest, StoresBatchesInOrderAndCountsDuplicatesOnce) {
  ingester_->Submit(Job(Frame(0, {Row("h100", 64), Row("h100", 128, false)})));
  ingester_->Submit(Job(Frame(1, {Row("h100", 128, false), Row("h100", 256)}, true)));
  const auto out = Take(2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, IngestOutcome::Kind::kStored);
  EXPECT_EQ(out[0].identity, "id-1");
  EXPECT_EQ(out[0].head.batch, 0u);
  EXPECT_EQ(out[0].rows, 2u);
  EXPECT_EQ(out[0].stored, 2u);
  EXPECT_EQ(out[0].failed, 1u);
  EXPECT_EQ(out[1].head.batch, 1u);
  EXPECT_TRUE(out[1].head.final);
  EXPECT_EQ(out[1].head.unit_id, 7u);
  EXPECT_EQ(out[1].head.sweep_id, "s1");
  EXPECT_EQ(out[1].stored, 1u);  // BM=128 was stored by the first batch
  EXPECT_EQ(ingester_->queued_bytes(), 0u);
  auto row = store_->Get("h100", "gemm", "f16", "N=1024", "kh", Cfg(256).Id());
  ASSERT_TRUE(row.has_value());  // stored before its outcome was posted
  EXPECT_EQ(row->worker, "host:1");
  EXPECT_EQ(row->sweep_id, "s1");
}

TEST_F(IngesterTest, ABaselineIsStoredApartAndABadOneCostsOnlyItself) {
  const Config def{{{"BM", 128}, {"STAGES", 3}}};
  auto frame = [&](uint64_t batch, const std::string& library) {
    Measurement b = Row("h100", 64);
    b.config = def;
    b.config_id = def.Id();
    b.baseline = library;
    Envelope env;
    env.sender = "w";
    env.command = Results{"s1", 7, batch, false, {Row("h100", 64 << batch)}, {}, {}, {b}, {}};
    const std::string bytes = EncodeEnvelope(env);
    return zmq::message_t(bytes.data(), bytes.size());
  };
  for (auto [batch, library] : {std::pair<uint64_t, const char*>{0, "cublaslt 13.1.0"}, {1, "rocblas 6"}}) {
    IngestJob job = Job(frame(batch, library));
    job.baseline = "cublaslt";
    job.baseline_config = def;
    ingester_->Submit(std::move(job));
  }
  const auto out = Take(2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, IngestOutcome::Kind::kStored);
  EXPECT_EQ(out[0].baseline_note, "");
  EXPECT_EQ(out[1].kind, IngestOutcome::Kind::kStored);  // the rows of the batch stand
  EXPECT_EQ(out[1].stored, 1u);
  EXPECT_NE(out[1].baseline_note.find("not the op's 'cublaslt'"), std::string::npos) << out[1].baseline_note;
  auto b = store_->GetBaseline("h100", "gemm", "f16", "N=1024");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->baseline, "cublaslt 13.1.0");
  EXPECT_EQ(b->worker, "host:1");
  EXPECT_EQ(*store_->CountResults(), 2u);  // the two configs' rows, not the baseline
}

TEST_F(IngesterTest, RefusesBatchesThatDoNotMatchTheLeaseAndStoresNothingOfThem) {
  ingester_->Submit(Job(Frame(0, {Row("h100", 64), Row("a100", 128)})));
  IngestJob unleased = Job(Frame(1, {Row("h100", 64)}));
  unleased.unit = nullptr;
  ingester_->Submit(std::move(unleased));
  const std::string garbage(64, '\x5a');
  ingester_->Submit(Job(zmq::message_t(garbage.data(), garbage.size())));
  const auto out = Take(3);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, IngestOutcome::Kind::kRefused);
  EXPECT_NE(out[0].error.find("a100"), std::string::npos) << out[0].error;
  EXPECT_EQ(out[1].kind, IngestOutcome::Kind::kRefused);
  EXPECT_NE(out[1].error.find("not leased"), std::string::npos) << out[1].error;
  EXPECT_EQ(out[2].kind, IngestOutcome::Kind::kRejected);
  EXPECT_NE(out[2].error.find("malformed"), std::string::npos) << out[2].error;
  auto count = store_->CountResults();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 0u);
}

// The rows are stored with the coordinator's time, however the sender's
// clock stamped them, and the skew comes back in the outcome; a row faster
// than its config's physical floor is refused as impossible.
TEST_F(IngesterTest, RowsKeepTheCoordinatorsTimeAndImpossibleFiguresAreRefused) {
  Measurement future = Row("h100", 64);
  future.unix_time = 2'000'000'000 + 86400;
  IngestJob job = Job(Frame(0, {future}));
  job.received_unix = 2'000'000'000;
  ingester_->Submit(std::move(job));
  IngestJob fast = Job(Frame(1, {Row("h100", 128)}));
  fast.floor_us[Cfg(128).Id()] = 11;  // its row says 10 us
  ingester_->Submit(std::move(fast));
  const auto out = Take(2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, IngestOutcome::Kind::kStored);
  EXPECT_DOUBLE_EQ(out[0].clock_skew_seconds, 86400);
  auto row = store_->Get("h100", "gemm", "f16", "N=1024", "kh", Cfg(64).Id());
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->unix_time, 2'000'000'000);
  EXPECT_EQ(out[1].kind, IngestOutcome::Kind::kRefused);
  EXPECT_NE(out[1].error.find("impossible"), std::string::npos) << out[1].error;
  // Rows measured before an outage, resent hours later: no skew.
  Measurement resent = Row("h100", 256);
  resent.unix_time = 2'000'000'000 - 6 * 3600;
  IngestJob late = Job(Frame(2, {resent}));
  late.received_unix = 2'000'000'000;
  ingester_->Submit(std::move(late));
  const auto again = Take(1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].kind, IngestOutcome::Kind::kStored) << again[0].error;
  EXPECT_DOUBLE_EQ(again[0].clock_skew_seconds, 0);
}

// Two workers' different images of one kernel: the first stays, the second
// is an alarm (counted in the outcome), and neither is corroborated.
TEST_F(IngesterTest, AConflictingCubinFromAnotherWorkerRaisesTheAlarm) {
  auto batch = [&](uint64_t n, const std::string& worker, const std::string& tag, const std::string& key = "") {
    Envelope env;
    env.sender = "w";
    Measurement m = Row("h100", 64);
    m.arch = "sm_90a";
    KernelImage k{"kh", Cfg(64).Id(), "f16", "sm_90a", "", testing::SyntheticCubin("sm_90a", "gemm", tag), {}, {}};
    k.sha256 = Sha256Hex(k.image);
    k.witnesses = {"forged:1", "forged:2"};  // the sender's word on who vouches: ignored
    env.command = Results{"s1", 7, n, false, {m}, {k}, {}, {}, {}};
    const std::string bytes = EncodeEnvelope(env);
    IngestJob job = Job(zmq::message_t(bytes.data(), bytes.size()));
    job.worker = worker;
    job.witness = WitnessOfKey(testing::TestKey(key.empty() ? worker : key));
    job.kernel_entries = {"gemm"};
    return job;
  };
  ingester_->Submit(batch(0, "host-a:1", "honest"));
  ingester_->Submit(batch(1, "host-b:1", "planted"));
  const auto out = Take(2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kernel_conflicts, 0u);
  EXPECT_EQ(out[1].kind, IngestOutcome::Kind::kStored);  // the rows are stored
  EXPECT_EQ(out[1].kernel_conflicts, 1u);
  EXPECT_NE(out[1].kernel_note.find("host-b:1"), std::string::npos) << out[1].kernel_note;
  auto k = store_->GetKernel("kh", Cfg(64).Id(), "f16", "sm_90a");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->image, testing::SyntheticCubin("sm_90a", "gemm", "honest"));
  EXPECT_EQ(k->witnesses, std::vector<std::string>{WitnessOfKey(testing::TestKey("host-a:1"))});
  EXPECT_FALSE(k->Corroborated());
}

// A witness is a key: one key answering under two worker names vouches
// once; two keys corroborate; a peer without a key vouches for nothing.
TEST_F(IngesterTest, AWitnessIsTheSendersKeyWhateverItsName) {
  auto batch = [&](uint64_t n, const std::string& worker, const std::string& key, const std::string& config_tag) {
    Envelope env;
    env.sender = "w";
    const int tile = config_tag == "a" ? 64 : 128;
    Measurement m = Row("h100", tile);
    m.arch = "sm_90a";
    KernelImage k{"kh", Cfg(tile).Id(), "f16", "sm_90a", "", testing::SyntheticCubin("sm_90a", "gemm", "x"), {}, {}};
    k.sha256 = Sha256Hex(k.image);
    env.command = Results{"s1", 7, n, false, {m}, {k}, {}, {}, {}};
    const std::string bytes = EncodeEnvelope(env);
    IngestJob job = Job(zmq::message_t(bytes.data(), bytes.size()));
    job.worker = worker;
    job.witness = WitnessOfKey(key.empty() ? "" : testing::TestKey(key));
    job.kernel_entries = {"gemm"};
    return job;
  };
  // Config a: one key, two names.
  ingester_->Submit(batch(0, "evil-a:1", "K1", "a"));
  ingester_->Submit(batch(1, "evil-b:1", "K1", "a"));
  // Config b: two keys; then a plaintext peer adds nothing.
  ingester_->Submit(batch(2, "host-a:1", "K1", "b"));
  ingester_->Submit(batch(3, "host-b:1", "K2", "b"));
  ingester_->Submit(batch(4, "plain:1", "", "b"));
  ASSERT_EQ(Take(5).size(), 5u);
  auto one = store_->GetKernel("kh", Cfg(64).Id(), "f16", "sm_90a");
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->witnesses, std::vector<std::string>{WitnessOfKey(testing::TestKey("K1"))});
  EXPECT_FALSE(one->Corroborated());
  auto two = store_->GetKernel("kh", Cfg(128).Id(), "f16", "sm_90a");
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(two->witnesses, (std::vector<std::string>{WitnessOfKey(testing::TestKey("K1")), WitnessOfKey(testing::TestKey("K2"))}));
  EXPECT_TRUE(two->Corroborated());
  // A store's older witnesses, worker names, count for nothing.
  KernelImage named = *two;
  named.witnesses = {"host-a:1", "host-b:1"};
  EXPECT_FALSE(named.Corroborated());
  named.witnesses = {"key:evil-a", "key:evil-b"};  // names of that prefix, not keys
  EXPECT_FALSE(named.Corroborated());
}

// Each way a row can fail to match its lease, alone in an otherwise honest
// batch: RowsToStore refuses the batch and names the fault.
TEST(RowsToStore, RefusesEveryRowThatIsNotWhatWasLeased) {
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* what;
    std::function<void(Measurement&)> spoil;
    const char* names;
  };
  const std::vector<Case> cases = {
      {"NaN median", [&](Measurement& m) { m.median_us = nan; }, "median_us"},
      {"negative median", [](Measurement& m) { m.median_us = -1; }, "median_us"},
      {"infinite median", [&](Measurement& m) { m.median_us = inf; }, "median_us"},
      {"huge median", [](Measurement& m) { m.median_us = 1e308; }, "us"},
      {"NaN stdev", [&](Measurement& m) { m.stdev_us = nan; }, "stdev_us"},
      {"no samples", [](Measurement& m) { m.samples = 0; }, "0 samples"},
      {"config outside the unit", [](Measurement& m) { m.config = Config{{{"BM", 7}, {"STAGES", 99}}}; m.config_id = m.config.Id(); }, "config"},
      {"other shape", [](Measurement& m) { m.shape = "N=2048"; }, "shape"},
      {"other op", [](Measurement& m) { m.op = "softmax"; }, "softmax"},
      {"other dtype", [](Measurement& m) { m.dtype = "bf16"; }, "bf16"},
      {"other model", [](Measurement& m) { m.gpu_model = "a100"; }, "a100"},
      {"other backend", [](Measurement& m) { m.backend = "sim"; }, "backend"},
      {"other kernel hash", [](Measurement& m) { m.kernel_hash = "old"; }, "kernel hash"},
      {"confirmed in a screening unit", [](Measurement& m) { m.pass = Measurement::Pass::kConfirm; }, "confirmed"},
      {"refined in a screening unit", [](Measurement& m) { m.pass = Measurement::Pass::kRefine; }, "refined"},
      {"NaN figure on a failure row", [&](Measurement& m) { m.failure = FailureClass::kCrash; m.max_us = nan; }, "max_us"},
      {"NaN energy", [&](Measurement& m) { m.energy_uj = nan; m.power_w = 400; }, "energy_uj"},
      {"negative power", [](Measurement& m) { m.energy_uj = 1; m.power_w = -400; }, "power_w"},
      {"energy on a failed row", [](Measurement& m) { m.failure = FailureClass::kCrash; m.energy_uj = 5; }, "did not run"},
      {"a board past any power", [](Measurement& m) { m.energy_uj = 1; m.power_w = 1e6; }, "past 5000 W"},
      {"a power limit past any board", [](Measurement& m) { m.power_limit_w = 1e9; }, "past 5000 W"},
      {"energy without power", [](Measurement& m) { m.energy_uj = 10; }, "without its power"},
      {"energy beyond its time", [](Measurement& m) { m.energy_uj = 1e12; m.power_w = 700; }, "beyond any power"},
  };
  IngestJob job = Job(Frame(0, {}));
  for (const auto& c : cases) {
    Results r{"s1", 7, 0, false, {Row("h100", 64), Row("h100", 128)}, {}, {}, {}, {}};
    c.spoil(r.measurements[1]);
    auto rows = RowsToStore(job, r);
    ASSERT_FALSE(rows.ok()) << c.what;
    EXPECT_NE(rows.status().message().find("row 1"), std::string::npos) << c.what << ": " << rows.status().message();
    EXPECT_NE(rows.status().message().find(c.names), std::string::npos) << c.what << ": " << rows.status().message();
  }
  Results other_sweep{"s2", 7, 0, false, {Row("h100", 64)}, {}, {}, {}, {}};
  EXPECT_FALSE(RowsToStore(job, other_sweep).ok());
}

TEST(BaselinesToStore, TakesTheOpsLibraryOnTheUnitsKeyAndRefusesTheRest) {
  IngestJob job = Job(Frame(0, {}));
  const Config def{{{"BM", 128}, {"STAGES", 3}}};  // the op's default, outside the unit's configs
  auto baseline = [&] {
    Measurement m = Row("h100", 64);
    m.config = def;
    m.config_id = def.Id();
    m.baseline = "cublaslt 13.0.0";
    return m;
  };
  Results r{"s1", 7, 0, false, {}, {}, {}, {baseline()}, {}};
  // An op without a [baseline] takes none.
  auto none = BaselinesToStore(job, r);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("declares no [baseline]"), std::string::npos) << none.status().message();

  job.baseline = "cublaslt";
  job.baseline_config = def;
  auto ok = BaselinesToStore(job, r);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].worker, "host:1");
  EXPECT_EQ((*ok)[0].sweep_id, "s1");
  EXPECT_EQ((*ok)[0].config.Canonical(), def.Canonical());

  const std::vector<std::pair<std::function<void(Measurement&)>, const char*>> bad = {
      {[](Measurement& m) { m.baseline = "cublas 12"; }, "not the op's 'cublaslt'"},
      {[](Measurement& m) { m.baseline = "cublaslt\xff"; }, "not the op's"},
      {[](Measurement& m) { m.shape = "N=7"; }, "shape"},
      {[](Measurement& m) { m.gpu_model = "a100"; }, "a100"},
      {[](Measurement& m) { m.median_us = std::nan(""); }, "median_us"},
      {[&](Measurement& m) { m.config = Cfg(64); m.config_id = Cfg(64).Id(); }, "config"},
      {[](Measurement& m) { m.pass = Measurement::Pass::kConfirm; }, "refined or confirmed"},
      {[](Measurement& m) { m.kernel_hash = "other"; }, "kernel hash"},
  };
  // An op whose hosts add to its hash: the baseline carries the digest its
  // key's rows carry, as a config's row must.
  {
    IngestJob digested = Job(Frame(0, {}));
    digested.baseline = "cublaslt";
    digested.baseline_config = def;
    digested.host_digested = true;
    Measurement m = baseline();
    auto without = BaselinesToStore(digested, Results{"s1", 7, 0, false, {}, {}, {}, {m}, {}});
    ASSERT_FALSE(without.ok());
    EXPECT_NE(without.status().message().find("include digest"), std::string::npos) << without.status().message();
    m.include_digest = std::string(32, 'a');
    m.kernel_hash = KernelHashWithIncludes("kh", m.include_digest);
    auto with = BaselinesToStore(digested, Results{"s1", 7, 0, false, {}, {}, {}, {m}, {}});
    EXPECT_TRUE(with.ok()) << with.status().message();
  }
  for (const auto& [spoil, want] : bad) {
    Results b{"s1", 7, 0, false, {}, {}, {}, {baseline(), baseline()}, {}};
    spoil(b.baselines[1]);
    auto got = BaselinesToStore(job, b);
    ASSERT_FALSE(got.ok()) << want;
    EXPECT_EQ(got.status().message().rfind("baseline 1: ", 0), 0u) << got.status().message();
    EXPECT_NE(got.status().message().find(want), std::string::npos) << got.status().message();
  }
}

TEST(RowsToStore, StampsTheLeasedConfigAndTakesPassFlagsOfItsUnit) {
  IngestJob job = Job(Frame(0, {}));
  auto unit = Leased();
  unit->refine = true;
  job.unit = unit;
  Results r{"s1", 7, 0, false, {Row("h100", 64)}, {}, {}, {}, {}};
  r.measurements[0].pass = Measurement::Pass::kRefine;
  r.measurements[0].screen_us = 1;  // the store's to set, never a peer's
  auto rows = RowsToStore(job, r);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].pass, Measurement::Pass::kRefine);
  EXPECT_EQ((*rows)[0].screen_us, 0);
  EXPECT_EQ((*rows)[0].config.Canonical(), Cfg(64).Canonical());
  EXPECT_EQ((*rows)[0].worker, "host:1");
  EXPECT_EQ((*rows)[0].sweep_id, "s1");
}

// An op with include roots: a row's kernel hash derives from the op's and
// the digest of the headers its worker read; nothing else passes for it.
TEST(RowsToStore, TakesHashesDerivedFromTheIncludeDigestOnlyForOpsWithIncludeRoots) {
  IngestJob job = Job(Frame(0, {}));
  const std::string digest(32, 'a');
  Results r{"s1", 7, 0, false, {Row("h100", 64)}, {}, {}, {}, {}};
  r.measurements[0].include_digest = digest;
  r.measurements[0].kernel_hash = KernelHashWithIncludes("kh", digest);
  // An op without include roots has no derived hashes.
  auto refused = RowsToStore(job, r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("include digest"), std::string::npos) << refused.status().message();
  job.host_digested = true;
  auto rows = RowsToStore(job, r);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ((*rows)[0].include_digest, digest);
  EXPECT_TRUE(MeasuresKernel((*rows)[0], "kh"));
  // A hash that is not derived from the op's, or a digest of no digest's form.
  const std::pair<const char*, std::function<void(Measurement&)>> bad[] = {
      {"kernel hash", [](Measurement& m) { m.kernel_hash = KernelHashWithIncludes("other-op", m.include_digest); }},
      {"kernel hash", [](Measurement& m) { m.include_digest = std::string(32, 'b'); }},
      {"include digest", [](Measurement& m) { m.include_digest = "../../etc"; }},
  };
  for (const auto& [want, spoil] : bad) {
    Results spoiled = r;
    spoil(spoiled.measurements[0]);
    auto out = RowsToStore(job, spoiled);
    ASSERT_FALSE(out.ok()) << want;
    EXPECT_NE(out.status().message().find(want), std::string::npos) << out.status().message();
  }
}

// A worker may leave out only the configs the unit offered under its
// digest, and says so in the unit's first batch; what it reused counts, and
// nothing of it is stored again.
TEST(CheckReused, TakesOnlyWhatTheUnitOfferedOnceAndNotMeasuredAsWell) {
  const std::string d1(32, 'a'), d2(32, 'b');
  IngestJob job;
  auto unit = Leased();
  unit->reusable = {{Cfg(64).Id(), d1}, {Cfg(64).Id(), d2}, {Cfg(128).Id(), d1}};
  job.unit = unit;
  auto check = [&](std::vector<StoredDigest> reused, std::vector<Measurement> rows = {}, uint64_t batch = 0) {
    return CheckReused(job, Results{"s1", 7, batch, true, std::move(rows), {}, {}, {}, std::move(reused)});
  };
  EXPECT_TRUE(check({{Cfg(64).Id(), d2}, {Cfg(128).Id(), d1}}, {Row("h100", 256)}).ok());
  const Status other_digest = check({{Cfg(128).Id(), d2}});
  EXPECT_NE(other_digest.message().find("reused 0: config " + Cfg(128).Id() + " under digest " + d2 +
                                        ", a row the unit did not offer"), std::string::npos)
      << other_digest.message();
  EXPECT_FALSE(check({{Cfg(256).Id(), d1}}).ok());  // nothing stored of it
  EXPECT_NE(check({{Cfg(64).Id(), d1}, {Cfg(64).Id(), d2}}).message().find("twice"), std::string::npos);
  EXPECT_NE(check({{Cfg(64).Id(), d1}}, {Row("h100", 64)}).message().find("measured as well"), std::string::npos);
  EXPECT_NE(check({{Cfg(64).Id(), d1}}, {}, 1).message().find("in batch 1"), std::string::npos);
}

TEST_F(IngesterTest, ReusedConfigsAreCountedAndAnOfferNotMadeRefusesTheBatch) {
  const std::string d1(32, 'a');
  auto frame = [&](uint64_t batch, std::vector<StoredDigest> reused) {
    Envelope env;
    env.sender = "w";
    env.command = Results{"s1", 7, batch, false, {Row("h100", 256)}, {}, {}, {}, std::move(reused)};
    const std::string bytes = EncodeEnvelope(env);
    return zmq::message_t(bytes.data(), bytes.size());
  };
  auto job = [&](zmq::message_t f) {
    IngestJob j = Job(std::move(f));
    auto unit = Leased();
    unit->reusable = {{Cfg(64).Id(), d1}};
    j.unit = unit;
    return j;
  };
  // Cfg(64)'s row under d1 is a stored wrong result: its reuse reports the failure.
  Measurement stored = Row("h100", 64, /*passed=*/false);
  stored.include_digest = d1;
  stored.kernel_hash = KernelHashWithIncludes("kh", d1);
  size_t put = 0;
  ASSERT_TRUE(store_->PutBatch({stored}, &put).ok());
  ingester_->Submit(job(frame(0, {{Cfg(64).Id(), d1}})));
  ingester_->Submit(job(frame(0, {{Cfg(128).Id(), d1}})));  // a resent first batch
  const auto out = Take(2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, IngestOutcome::Kind::kStored);
  EXPECT_EQ(out[0].reused, 1u);
  EXPECT_EQ(out[0].reused_failed, 1u);
  EXPECT_EQ(out[0].reused_failed_by_class.at("wrong_result"), 1u);
  EXPECT_EQ(out[0].stored, 1u);
  EXPECT_EQ(out[1].kind, IngestOutcome::Kind::kRefused);
  EXPECT_NE(out[1].error.find("did not offer"), std::string::npos) << out[1].error;
}

// A profile is of a row of the batch, on the unit's key, with values in range.
TEST(CheckProfiles, RefusesProfilesThatAreNotOfTheBatchOrOutOfRange) {
  IngestJob job = Job(Frame(0, {}));
  auto unit = Leased();
  unit->confirm = true;  // profiles come from confirm units
  job.unit = unit;
  Results r{"s1", 7, 0, false, {Row("h100", 64)}, {}, {}, {}, {}};
  KernelProfile p;
  p.gpu_model = "h100";
  p.op = "gemm";
  p.dtype = "f16";
  p.shape = "N=1024";
  p.kernel_hash = "kh";
  p.config_id = Cfg(64).Id();
  p.memory_pct = 90;
  ClassifyBottleneck(&p);
  r.profiles = {p};
  EXPECT_TRUE(CheckProfiles(job, r).ok()) << CheckProfiles(job, r).message();
  const std::pair<const char*, std::function<void(KernelProfile&)>> bad[] = {
      {"without a row", [](KernelProfile& q) { q.config_id = Cfg(128).Id(); }},
      {"without a row", [](KernelProfile& q) { q.kernel_hash = "other"; }},
      {"in a unit of", [](KernelProfile& q) { q.shape = "N=2048"; }},
      {"in a unit of", [](KernelProfile& q) { q.gpu_model = "a100"; }},
      {"memory_pct", [](KernelProfile& q) { q.memory_pct = std::nan(""); }},
      {"bottleneck", [](KernelProfile& q) { q.bottleneck = "none"; }},
  };
  for (const auto& [want, spoil] : bad) {
    Results spoiled = r;
    spoil(spoiled.profiles[0]);
    Status st = CheckProfiles(job, spoiled);
    ASSERT_FALSE(st.ok()) << want;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  }
  r.profiles = {p, p};
  EXPECT_NE(CheckProfiles(job, r).message().find("twice"), std::string::npos);
  r.profiles = {p};
  r.profiles[0].tool = "ncu\x1b[31m";
  EXPECT_NE(CheckProfiles(job, r).message().find("tool"), std::string::npos);
  r.profiles = {p};
  job.unit = Leased();  // a screening unit
  EXPECT_NE(CheckProfiles(job, r).message().find("no confirm unit"), std::string::npos);
}

// Cubins come with a checked row of their config from the sender's own
// architecture; anything else refuses the batch.
TEST(CheckKernels, RefusesEveryCubinThatIsNotOfTheUnitOrNotWhatItClaims) {
  IngestJob job = Job(Frame(0, {}));
  Results r;
  r.sweep_id = "s1";
  Measurement row = Row("h100", 64);
  row.arch = "sm_90a";
  r.measurements = {row};
  auto image = [&](auto&& change) {
    KernelImage k{"kh", Cfg(64).Id(), "f16", "sm_90a", "", testing::SyntheticCubin("sm_90a", "gemm", "cubin"), {}, {}};
    change(k);
    if (k.sha256.empty()) k.sha256 = Sha256Hex(k.image);
    return k;
  };
  r.kernels = {image([](KernelImage&) {})};
  EXPECT_TRUE(CheckKernels(job, r).ok()) << CheckKernels(job, r).message();
  const std::pair<const char*, std::function<void(KernelImage&)>> bad[] = {
      {"sha256 does not match", [](KernelImage& k) { k.sha256 = Sha256Hex("other"); }},
      {"not an ELF", [](KernelImage& k) { k.image = "MZ" + k.image; }},
      // Its kernel hash is none of the batch's checked rows (which RowsToStore checks).
      {"without a checked row", [](KernelImage& k) { k.kernel_hash = "kx"; }},
      {"dtype bf16", [](KernelImage& k) { k.dtype = "bf16"; }},
      {"that the unit does not hold", [](KernelImage& k) { k.config_id = Cfg(512).Id(); }},
      {"a cubin for sm_90, not sm_80", [](KernelImage& k) { k.arch = "sm_80"; }},
      // What a hostile worker plants: an x86 program, a zero-filled ELF, a
      // cubin of another SM, a cubin without the op's kernel.
      {"not CUDA (190)", [](KernelImage& k) {
         std::ifstream in("/bin/true", std::ios::binary);
         k.image.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
         k.sha256.clear();
       }},
      {"not a 64-bit", [](KernelImage& k) {
         k.image = std::string("\x7f" "ELF", 4) + std::string(2 << 20, '\0');
         k.sha256.clear();
       }},
      {"a cubin for sm_80, not sm_90a", [](KernelImage& k) {
         k.image = testing::SyntheticCubin("sm_80", "gemm", "cubin");
         k.sha256.clear();
       }},
      {"without the kernel 'gemm'", [](KernelImage& k) {
         k.image = testing::SyntheticCubin("sm_90a", "not_gemm", "cubin");
         k.sha256.clear();
       }},
      {"without a checked row", [](KernelImage& k) { k.config_id = Cfg(128).Id(); }},
      {"bad configId", [](KernelImage& k) { k.config_id = "../x"; }},
  };
  for (const auto& [want, change] : bad) {
    r.kernels = {image(change)};
    Status st = CheckKernels(job, r);
    ASSERT_FALSE(st.ok()) << want;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  }
  // The same cubin twice in one batch.
  r.kernels = {image([](KernelImage&) {}), image([](KernelImage&) {})};
  EXPECT_NE(CheckKernels(job, r).message().find("twice in one batch"), std::string::npos);
  // A row may not claim an architecture the sender's devices are not.
  r.kernels.clear();
  r.measurements[0].arch = "sm_100";
  auto rows = RowsToStore(job, r);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("arch 'sm_100'"), std::string::npos);
}

}  // namespace
}  // namespace tune
