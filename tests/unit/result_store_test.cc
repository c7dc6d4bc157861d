// ResultStore against a real RocksDB in a temporary directory.
// Long on purpose: one suite per component, a test per store rule.
#include "publish/publish.h"
#include "store/result_store.h"
#include "store/records.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "support/temp_dir.h"

namespace tune {
namespace {

namespace fs = std::filesystem;

using tune::testing::TempDir;

Measurement M(const std::string& gpu, const std::string& op, const std::string& shape,
              const std::string& config_id, double median_us,
              FailureClass failure = FailureClass::kNone, const std::string& kernel_hash = "kh1") {
  Measurement m;
  m.gpu_model = gpu;
  m.op = op;
  m.dtype = "f16";
  m.shape = shape;
  m.kernel_hash = kernel_hash;
  m.config_id = config_id;
  m.config.params = {{"BM", 128}, {"BN", 64}};
  m.failure = failure;
  m.check_passed = failure == FailureClass::kNone;
  m.samples = failure == FailureClass::kNone ? 20 : 0;
  m.median_us = median_us;
  m.backend = "sim";
  m.worker = "w1";
  return m;
}

std::unique_ptr<ResultStore> OpenOrDie(const std::string& path) {
  auto s = ResultStore::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::vector<std::string> ScanKeys(ResultStore& store, const ResultFilter& f) {
  std::vector<std::string> keys;
  Status st = store.Scan(f, [&](const Measurement& m) {
    keys.push_back(m.gpu_model + "|" + m.op + "|" + m.shape + "|" + m.kernel_hash + "|" + m.config_id);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st.message();
  return keys;
}

ResultFilter Filter(std::string gpu_model = "", std::string op = "", std::string dtype = "",
                    std::string shape = "", std::string kernel_hash = "") {
  ResultFilter f;
  f.gpu_model = std::move(gpu_model);
  f.op = std::move(op);
  f.dtype = std::move(dtype);
  f.shape = std::move(shape);
  f.kernel_hash = std::move(kernel_hash);
  return f;
}

const std::string kS1 = "M=1024,N=1024,K=1024";
const std::string kS2 = "M=4096,N=4096,K=4096";

TEST(ResultStoreTest, BaselinesStayApartFromConfigsAndAFailureKeepsAFigure) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c1", 10.0)).ok());
  Measurement b = M("h100", "gemm", kS1, "c0", 12.0);
  EXPECT_FALSE(store->PutBaseline(b).ok());  // a row without its library is no baseline
  b.baseline = "cublaslt 13.0.0";
  ASSERT_TRUE(store->PutBaseline(b).ok());
  // Not a config's row: counts, scans and bests never see it.
  EXPECT_EQ(*store->CountResults(), 1u);
  auto best = store->Best(ResultFilter{"h100", "gemm", "f16", kS1, ""});
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c1");
  auto got = store->GetBaseline("h100", "gemm", "f16", kS1);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->baseline, "cublaslt 13.0.0");
  EXPECT_EQ(got->median_us, 12.0);
  // A host without the library does not erase the figure; a newer figure replaces it.
  Measurement missing = b;
  missing.failure = FailureClass::kLaunchError;
  missing.failure_message = "cuBLASLt not available on this host";
  missing.samples = 0;
  missing.check_passed = false;
  missing.median_us = 0;
  ASSERT_TRUE(store->PutBaseline(missing).ok());
  EXPECT_EQ(store->GetBaseline("h100", "gemm", "f16", kS1)->median_us, 12.0);
  Measurement newer = b;
  newer.median_us = 11.0;
  ASSERT_TRUE(store->PutBaseline(newer).ok());
  EXPECT_EQ(store->GetBaseline("h100", "gemm", "f16", kS1)->median_us, 11.0);
  EXPECT_EQ(store->GetBaseline("h100", "gemm", "bf16", kS1).status().code(), StatusCode::kNotFound);
  // Where only a failure was ever stored, it says why.
  Measurement other = missing;
  other.gpu_model = "a100";
  ASSERT_TRUE(store->PutBaseline(other).ok());
  EXPECT_EQ(store->GetBaseline("a100", "gemm", "f16", kS1)->failure_message, "cuBLASLt not available on this host");
}

TEST(ResultStoreTest, PutIsIdempotent) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  const Measurement m = M("h100", "gemm", kS1, "c1", 10.0);
  auto first = store->Put(m);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(*first);
  Measurement retry = m;
  retry.median_us = 5.0;  // a retried lease measures again; the first figure stays
  retry.worker = "w2";
  auto second = store->Put(retry);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  EXPECT_EQ(*store->CountResults(), 1u);
  auto got = store->Get("h100", "gemm", "f16", kS1, "kh1", "c1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->median_us, 10.0);
  EXPECT_EQ(got->worker, "w1");
  EXPECT_EQ(got->config.params, m.config.params);

  // Duplicates inside one batch and against stored rows count once.
  size_t stored = 99;
  ASSERT_TRUE(store->PutBatch({m, M("h100", "gemm", kS1, "c2", 9.0), M("h100", "gemm", kS1, "c2", 8.0),
                               M("h100", "gemm", kS2, "c2", 30.0)},
                              &stored)
                  .ok());
  EXPECT_EQ(stored, 2u);
  EXPECT_EQ(*store->CountResults(), 3u);
  ASSERT_TRUE(store->PutBatch({m}, &stored).ok());
  EXPECT_EQ(stored, 0u);
}

// An in-memory store keeps the same rules as a folder's (idempotent Put,
// the best row by pass then median), reads through ResultReader, and leaves
// nothing on disk: not under its name, not in the working folder.
TEST(ResultStoreTest, AStoreInMemoryKeepsTheRulesAndWritesNothing) {
  TempDir dir;
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  const std::string name = dir.Sub("memory");
  auto opened = ResultStore::Open(name, {.in_memory = true});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<ResultStore> store = std::move(*opened);
  size_t stored = 0;
  Measurement confirmed = M("h100", "gemm", kS1, "c2", 12.0);
  confirmed.pass = Measurement::Pass::kConfirm;
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10.0), M("h100", "gemm", kS1, "c1", 5.0), confirmed},
                              &stored).ok());
  EXPECT_EQ(stored, 2u);
  ResultReader& reader = *store;
  EXPECT_EQ(*reader.CountResults(), 2u);
  EXPECT_EQ(reader.Get("h100", "gemm", "f16", kS1, "kh1", "c1")->median_us, 10.0);
  ResultFilter f;
  f.gpu_model = "h100";
  auto best = reader.Best(f);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c2");  // confirmed outranks a faster screening row
  EXPECT_TRUE(store->Close().ok());
  store.reset();
  EXPECT_FALSE(fs::exists(name));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  fs::current_path(cwd);
}

TEST(ResultStoreTest, RejectsIncompleteKeysAtomically) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  Measurement bad = M("h100", "gemm", kS1, "c1", 1.0);
  bad.kernel_hash.clear();
  auto r = store->Put(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kernel_hash"), std::string::npos) << r.status().message();

  Measurement nul = M("h100", "gemm", kS1, "c1", 1.0);
  nul.op = std::string("ge\0mm", 5);
  EXPECT_FALSE(store->Put(nul).ok());

  size_t stored = 7;
  EXPECT_FALSE(store->PutBatch({M("h100", "gemm", kS1, "c1", 1.0), bad}, &stored).ok());
  EXPECT_EQ(stored, 0u);
  EXPECT_EQ(*store->CountResults(), 0u) << "a failed batch must write nothing";
}

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrDie(dir_.Sub("db"));
    ASSERT_TRUE(store_);
    size_t stored = 0;
    ASSERT_TRUE(store_
                    ->PutBatch(
                        {
                            M("h100", "gemm", kS1, "c1", 10),
                            M("h100", "gemm", kS1, "c2", 11),
                            M("h100", "gemm", kS2, "c1", 100),
                            M("h100", "gemm", kS2, "c1", 90, FailureClass::kNone, "kh2"),
                            M("h100", "softmax", kS1, "c1", 3),
                            // Shares "h100" as a string prefix; must never leak
                            // into the h100 scan.
                            M("h100-nvl", "gemm", kS1, "c1", 9),
                            M("h200", "gemm", kS1, "c1", 8),
                            M("h200", "gemm", kS2, "c1", 70),
                            M("a100", "gemm", kS1, "c1", 20),
                            M("a100", "gemmx", kS1, "c1", 20),
                        },
                        &stored)
                    .ok());
    ASSERT_EQ(stored, 10u);
  }
  TempDir dir_;
  std::unique_ptr<ResultStore> store_;
};

TEST_F(ScanTest, AllResultsOfAnOpOnOneGpu) {
  EXPECT_EQ(ScanKeys(*store_, Filter("h100", "gemm")),
            (std::vector<std::string>{
                "h100|gemm|" + kS1 + "|kh1|c1",
                "h100|gemm|" + kS1 + "|kh1|c2",
                "h100|gemm|" + kS2 + "|kh1|c1",
                "h100|gemm|" + kS2 + "|kh2|c1",
            }));
  EXPECT_EQ(ScanKeys(*store_, Filter("h100")).size(), 5u);
  EXPECT_EQ(ScanKeys(*store_, Filter("h100", "gem")).size(), 0u);
}

TEST_F(ScanTest, FieldsAfterAGapAreFiltered) {
  EXPECT_EQ(ScanKeys(*store_, Filter("h100", "", "", "", "kh2")),
            (std::vector<std::string>{"h100|gemm|" + kS2 + "|kh2|c1"}));
  EXPECT_EQ(ScanKeys(*store_, Filter("h100", "gemm", "", kS1)).size(), 2u);
}

TEST_F(ScanTest, EveryGpuOfAShape) {
  auto keys = ScanKeys(*store_, Filter("", "gemm", "f16", kS1));
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "a100|gemm|" + kS1 + "|kh1|c1",
                      "h100|gemm|" + kS1 + "|kh1|c1",
                      "h100|gemm|" + kS1 + "|kh1|c2",
                      "h100-nvl|gemm|" + kS1 + "|kh1|c1",
                      "h200|gemm|" + kS1 + "|kh1|c1",
                  }));
  // op without dtype/shape: every row of the op, "gemmx" excluded.
  EXPECT_EQ(ScanKeys(*store_, Filter("", "gemm")).size(), 8u);
  EXPECT_EQ(ScanKeys(*store_, Filter("", "gemm", "", "", "kh2")).size(), 1u);
}

TEST_F(ScanTest, FullScanAndEarlyStop) {
  EXPECT_EQ(ScanKeys(*store_, {}).size(), 10u);
  EXPECT_EQ(ScanKeys(*store_, Filter("", "", "", kS2)).size(), 3u);
  int seen = 0;
  ASSERT_TRUE(store_->Scan({}, [&](const Measurement&) { return ++seen < 3; }).ok());
  EXPECT_EQ(seen, 3);
}

TEST(ResultStoreTest, AnUncheckedRowNeverOutranksACheckedOne) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  auto unchecked = [](const std::string& config, double us) {
    Measurement m = M("h100", "gemm", kS1, config, us);
    m.check_passed = false;
    m.unchecked = true;
    return m;
  };
  ASSERT_TRUE(store->Put(unchecked("u1", 1)).ok());
  auto only = store->Best(Filter("h100", "gemm"));
  ASSERT_TRUE(only.ok());
  ASSERT_EQ(only->size(), 1u);
  EXPECT_EQ((*only)[0].config_id, "u1");  // nothing checked: the fastest unchecked row
  EXPECT_TRUE((*only)[0].unchecked);
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c1", 10)).ok());
  ASSERT_TRUE(store->Put(unchecked("u2", 0.5)).ok());
  auto best = store->Best(Filter("h100", "gemm"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c1");
  EXPECT_FALSE((*best)[0].unchecked);
}

TEST(ResultStoreTest, BestIgnoresFailedAndUncheckedRows) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  Measurement unchecked = M("h100", "gemm", kS1, "c3", 2);
  unchecked.check_passed = false;
  Measurement no_samples = M("h100", "gemm", kS1, "c4", 3);
  no_samples.samples = 0;
  Measurement nan = M("h100", "gemm", kS1, "c7", std::nan(""));
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c1", 10)).ok());
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c2", 1, FailureClass::kTimeout)).ok());
  ASSERT_TRUE(store->Put(unchecked).ok());
  ASSERT_TRUE(store->Put(no_samples).ok());
  ASSERT_TRUE(store->Put(nan).ok());
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c5", 8)).ok());
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c6", 9)).ok());  // slower: not best
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c8", 8)).ok());  // tie: the first stays
  // Another kernel hash is another best key: old results stay queryable.
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c1", 50, FailureClass::kNone, "kh2")).ok());
  ASSERT_TRUE(store->Put(M("h200", "gemm", kS1, "c1", 1, FailureClass::kWrongResult)).ok());

  auto best = store->Best(Filter("h100", "gemm"));
  ASSERT_TRUE(best.ok()) << best.status().message();
  ASSERT_EQ(best->size(), 2u);
  EXPECT_EQ((*best)[0].kernel_hash, "kh1");
  EXPECT_EQ((*best)[0].config_id, "c5");
  EXPECT_EQ((*best)[0].median_us, 8);
  EXPECT_EQ((*best)[1].kernel_hash, "kh2");
  EXPECT_EQ((*best)[1].config_id, "c1");

  // A GPU with only failures has no best at all.
  auto h200 = store->Best(Filter("h200"));
  ASSERT_TRUE(h200.ok());
  EXPECT_TRUE(h200->empty());
  auto by_hash = store->Best(Filter("", "", "", "", "kh2"));
  ASSERT_TRUE(by_hash.ok());
  EXPECT_EQ(by_hash->size(), 1u);

  // Best also works within one batch: the faster of two new rows wins.
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({M("a100", "gemm", kS1, "c1", 30), M("a100", "gemm", kS1, "c2", 25),
                               M("a100", "gemm", kS1, "c3", 27)},
                              &stored)
                  .ok());
  auto a100 = store->Best(Filter("a100"));
  ASSERT_TRUE(a100.ok());
  ASSERT_EQ(a100->size(), 1u);
  EXPECT_EQ((*a100)[0].config_id, "c2");
}

TEST(ResultStoreTest, BestAcrossBatchesAndReopens) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.Sub("db"));
    ASSERT_TRUE(store);
    size_t stored = 0;
    ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 20)}, &stored).ok());
    ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c2", 30)}, &stored).ok());  // slower
    ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c3", 15)}, &stored).ok());  // faster
  }
  auto store = OpenOrDie(dir.Sub("db"));  // a fresh handle reads the best row back
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c4", 16)).ok());
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c3");
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c5", 14)).ok());
  best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c5");
}

Measurement Confirmed(Measurement m) {
  m.pass = Measurement::Pass::kConfirm;
  m.worker = "confirmer";
  return m;
}

TEST(ResultStoreTest, AConfirmedRowReplacesItsUnconfirmedRowOnceAndOutranksTheRest) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10), M("h100", "gemm", kS1, "c2", 11),
                               M("h100", "gemm", kS1, "c3", 12), M("h100", "gemm", kS1, "c4", 30)},
                              &stored)
                  .ok());
  // Timed together, c2 is the fastest and c1 slower than its short figure.
  ASSERT_TRUE(store->PutBatch({Confirmed(M("h100", "gemm", kS1, "c2", 10.5)),
                               Confirmed(M("h100", "gemm", kS1, "c1", 10.8)),
                               Confirmed(M("h100", "gemm", kS1, "c3", 11.9))},
                              &stored)
                  .ok());
  EXPECT_EQ(stored, 3u);
  EXPECT_EQ(*store->CountResults(), 4u);  // replaced, not added
  auto c1 = store->Get("h100", "gemm", "f16", kS1, "kh1", "c1");
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->pass, Measurement::Pass::kConfirm);
  EXPECT_EQ(c1->median_us, 10.8);
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c2");

  // An unconfirmed figure, however fast, neither replaces a confirmed row
  // nor outranks it; a second confirmed row of the key is a duplicate.
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c5", 5), Confirmed(M("h100", "gemm", kS1, "c2", 1))},
                              &stored)
                  .ok());
  EXPECT_EQ(stored, 1u);
  auto reopened_best = [&] {
    store.reset();
    store = OpenOrDie(dir.Sub("db"));
    auto b = store->Best(Filter("h100"));
    EXPECT_TRUE(b.ok());
    return b.ok() && b->size() == 1 ? (*b)[0] : Measurement{};
  };
  Measurement b = reopened_best();
  EXPECT_EQ(b.config_id, "c2");
  EXPECT_EQ(b.median_us, 10.5);
}

// A retime's rows replace other sweeps' rows of their key whatever their
// pass (tonight's figures), and the best moves with them; within the
// retime the usual pass rule holds, so a resent screening row of it does
// not undo its confirmed one.
TEST(ResultStoreTest, ARetimesRowsReplaceOtherSweepsRowsOfAnyPass) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  auto of = [](Measurement m, const std::string& sweep) {
    m.sweep_id = sweep;
    return m;
  };
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({of(Confirmed(M("h100", "gemm", kS1, "c1", 10)), "night1"),
                               of(Confirmed(M("h100", "gemm", kS1, "c2", 11)), "night1")},
                              &stored)
                  .ok());
  // Without a retime a later sweep's screening row is a duplicate.
  ASSERT_TRUE(store->PutBatch({of(M("h100", "gemm", kS1, "c1", 13), "night2")}, &stored).ok());
  EXPECT_EQ(stored, 0u);
  ResultStore::Replacing retime;
  retime.retime_sweep = "night2";
  ASSERT_TRUE(store->PutBatch({of(M("h100", "gemm", kS1, "c1", 13), "night2")}, &stored, retime).ok());
  EXPECT_EQ(stored, 1u) << "a retime's screening row replaces last night's confirmed one";
  auto c1 = store->Get("h100", "gemm", "f16", kS1, "kh1", "c1");
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->median_us, 13);
  EXPECT_EQ(c1->sweep_id, "night2");
  EXPECT_EQ(c1->screen_us, 0) << "an earlier sweep's figure is no screening figure of the retime";
  ASSERT_TRUE(store->PutBatch({of(Confirmed(M("h100", "gemm", kS1, "c1", 12.5)), "night2"),
                               of(Confirmed(M("h100", "gemm", kS1, "c2", 11.5)), "night2")},
                              &stored, retime)
                  .ok());
  EXPECT_EQ(stored, 2u);
  ASSERT_TRUE(store->PutBatch({of(M("h100", "gemm", kS1, "c1", 1), "night2")}, &stored, retime).ok());
  EXPECT_EQ(stored, 0u) << "the retime's own confirmed row stays";
  EXPECT_EQ(*store->CountResults(), 2u);
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c2") << "c1 got slower tonight";
  EXPECT_EQ((*best)[0].median_us, 11.5);
}

TEST(ResultStoreTest, AConfigThatFailsWhenConfirmedGivesUpTheBestRow) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10), M("h100", "gemm", kS1, "c2", 11),
                               M("h100", "gemm", kS1, "c3", 12)},
                              &stored)
                  .ok());
  // Every confirmed config failed (a racy kernel, say): the best row goes
  // to the fastest config that was not confirmed, in either order.
  ASSERT_TRUE(store->PutBatch({Confirmed(M("h100", "gemm", kS1, "c2", 0, FailureClass::kWrongResult)),
                               Confirmed(M("h100", "gemm", kS1, "c1", 0, FailureClass::kNan))},
                              &stored)
                  .ok());
  EXPECT_EQ(stored, 2u);
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c3");
  auto c1 = store->Get("h100", "gemm", "f16", kS1, "kh1", "c1");
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->failure, FailureClass::kNan);

  // With no valid row left the key has no best at all.
  ASSERT_TRUE(store->Put(Confirmed(M("h100", "gemm", kS1, "c3", 0, FailureClass::kNan))).ok());
  best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  EXPECT_TRUE(best->empty());
}

TEST(ResultStoreTest, AValidConfirmedRowAfterAFailureInOneBatchTakesTheBestRow) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10), M("h100", "gemm", kS1, "c2", 11)}, &stored).ok());
  // c1 fails first (the best row would go to c2, then c2 fails too and it
  // is deleted); c3, new, is staged last in the same batch and must win.
  ASSERT_TRUE(store->PutBatch({Confirmed(M("h100", "gemm", kS1, "c1", 0, FailureClass::kWrongResult)),
                               Confirmed(M("h100", "gemm", kS1, "c2", 0, FailureClass::kWrongResult)),
                               M("h100", "gemm", kS1, "c3", 20)},
                              &stored)
                  .ok());
  EXPECT_EQ(stored, 3u);
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c3");
  // The handle's cache agrees with the store: a slower row does not win.
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c4", 25)).ok());
  best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c3");
}

Measurement Refined(Measurement m) {
  m.pass = Measurement::Pass::kRefine;
  m.worker = "refiner";
  return m;
}

TEST(ResultStoreTest, ARefinedRowReplacesItsScreeningRowAndTheBestMovesWithIt) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10.0), M("h100", "gemm", kS1, "c2", 10.1),
                               M("h100", "gemm", kS1, "c3", 10.2), M("h100", "gemm", kS1, "c4", 30)},
                              &stored)
                  .ok());
  // Timed to the CI target, c1 (the screening best) is slower than c2; in
  // one batch, with c1 staged after c2.
  ASSERT_TRUE(store->PutBatch({Refined(M("h100", "gemm", kS1, "c2", 10.15)),
                               Refined(M("h100", "gemm", kS1, "c1", 10.3))},
                              &stored)
                  .ok());
  EXPECT_EQ(stored, 2u);
  EXPECT_EQ(*store->CountResults(), 4u);  // replaced, not added
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c2");
  EXPECT_EQ((*best)[0].pass, Measurement::Pass::kRefine);

  // c1 staged before c2: the best row must not stop at c3's screening
  // figure while c2's refined one is in the same batch.
  TempDir dir2;
  auto other = OpenOrDie(dir2.Sub("db"));
  ASSERT_TRUE(other->PutBatch({M("h100", "gemm", kS1, "c1", 10.0), M("h100", "gemm", kS1, "c2", 10.1),
                               M("h100", "gemm", kS1, "c3", 10.2)},
                              &stored)
                  .ok());
  ASSERT_TRUE(other->PutBatch({Refined(M("h100", "gemm", kS1, "c2", 10.15)),
                               Refined(M("h100", "gemm", kS1, "c1", 10.3))},
                              &stored)
                  .ok());
  ASSERT_TRUE(other->PutBatch({Refined(M("h100", "gemm", kS1, "c3", 10.12))}, &stored).ok());
  best = other->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c3");

  // A second refined row and a screening row are duplicates; a confirmed
  // row replaces a refined one, and nothing replaces a confirmed row.
  ASSERT_TRUE(store->PutBatch({Refined(M("h100", "gemm", kS1, "c2", 1)), M("h100", "gemm", kS1, "c1", 1)}, &stored)
                  .ok());
  EXPECT_EQ(stored, 0u);
  ASSERT_TRUE(store->Put(Confirmed(M("h100", "gemm", kS1, "c1", 10.4))).ok());
  ASSERT_TRUE(store->PutBatch({Refined(M("h100", "gemm", kS1, "c1", 2))}, &stored).ok());
  EXPECT_EQ(stored, 0u);
  store.reset();
  store = OpenOrDie(dir.Sub("db"));
  best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c1");
  EXPECT_EQ((*best)[0].pass, Measurement::Pass::kConfirm);
  auto c2 = store->Get("h100", "gemm", "f16", kS1, "kh1", "c2");
  ASSERT_TRUE(c2);
  EXPECT_EQ(c2->pass, Measurement::Pass::kRefine);
  EXPECT_EQ(c2->median_us, 10.15);
  // Each replacing row keeps the config's screening figure: the refined
  // row the one it replaced, the confirmed row the refined row's.
  EXPECT_EQ(c2->screen_us, 10.1);
  EXPECT_EQ((*best)[0].screen_us, 10.0);
  auto c4 = store->Get("h100", "gemm", "f16", kS1, "kh1", "c4");
  ASSERT_TRUE(c4);
  EXPECT_EQ(c4->screen_us, 0.0);
}

TEST(ResultStoreTest, ARefinedRowOutranksAFasterScreeningRow) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  size_t stored = 0;
  ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10.0), M("h100", "gemm", kS1, "c2", 11.0)}, &stored)
                  .ok());
  // c1 refined on a device hotter than screening's: slower than c2's
  // screening figure, which was taken under other conditions.
  ASSERT_TRUE(store->Put(Refined(M("h100", "gemm", kS1, "c1", 11.5))).ok());
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c1");
  EXPECT_EQ((*best)[0].pass, Measurement::Pass::kRefine);
  EXPECT_EQ((*best)[0].screen_us, 10.0);
  // A screening row arriving later does not take it either, after a reopen
  // (the rank is read back from the stored best row).
  store.reset();
  store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c3", 9.0)).ok());
  best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c1");
}

// Opens the store's RocksDB database directly and hands `edit` the database
// and its column families by name: a store as another build left it.
void EditRaw(const std::string& path,
             const std::function<void(rocksdb::DB*, std::map<std::string, rocksdb::ColumnFamilyHandle*>&)>& edit) {
  rocksdb::DBOptions options;
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(options, path, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names) descs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, descs, &handles, &db).ok());
  std::map<std::string, rocksdb::ColumnFamilyHandle*> cf;
  for (size_t i = 0; i < names.size(); ++i) cf[names[i]] = handles[i];
  edit(db, cf);
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  delete db;
}

TEST(ResultStoreTest, BestRowsPickedByTheMedianAloneArePickedAgainOnOpen) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    auto store = OpenOrDie(path);
    size_t stored = 0;
    ASSERT_TRUE(store->PutBatch({M("h100", "gemm", kS1, "c1", 10.0), M("h100", "gemm", kS1, "c2", 11.0),
                                 M("h100", "gemm", kS1, "c3", 11.2)},
                                &stored)
                    .ok());
    ASSERT_TRUE(store->PutBatch({Refined(M("h100", "gemm", kS1, "c2", 11.5)),
                                 Refined(M("h100", "gemm", kS1, "c3", 11.8))},
                                &stored)
                    .ok());
  }
  // As a build that ranked by the median alone left it: c1's faster
  // screening row holds the best, and the store has no stamp.
  const std::string best_key = std::string("h100\0gemm\0f16\0", 14) + kS1 + std::string("\0kh1", 4);
  EditRaw(path, [&](rocksdb::DB* db, auto& cf) {
    std::string c1;
    ASSERT_TRUE(db->Get({}, cf["results"], best_key + std::string("\0c1", 3), &c1).ok());
    ASSERT_TRUE(db->Put({}, cf["best"], best_key, c1).ok());
    ASSERT_TRUE(db->Delete({}, cf["meta"], "best_rank").ok());
  });
  auto store = OpenOrDie(path);
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c2");
  // A slower refined row does not take it (it would have, compared with
  // c1's row alone).
  auto c4 = Refined(M("h100", "gemm", kS1, "c4", 12.0));
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c4", 10.5)).ok());
  ASSERT_TRUE(store->Put(c4).ok());
  best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  EXPECT_EQ((*best)[0].config_id, "c2");
}

TEST(ResultStoreTest, ReopenPersistsEverything) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c1", 10)).ok());
    ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c2", 7)).ok());
    ASSERT_TRUE(store->PutSweep("s-1", std::string("state\0bytes", 11)).ok());
  }
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->CountResults(), 2u);
  EXPECT_TRUE(store->Get("h100", "gemm", "f16", kS1, "kh1", "c1"));
  EXPECT_FALSE(store->Get("h100", "gemm", "f16", kS1, "kh1", "c9"));
  auto best = store->Best({});
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c2");
  EXPECT_EQ(store->GetSweep("s-1"), std::string("state\0bytes", 11));
  // Still idempotent across restarts (a coordinator restarted mid-sweep).
  auto again = store->Put(M("h100", "gemm", kS1, "c1", 1));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

// One flipped byte in a table file: the store refuses to open, with one
// line naming the file, instead of failing writes later.
TEST(ResultStoreTest, ACorruptTableFileIsRefusedAtOpenNamingTheFile) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store);
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c" + std::to_string(i), 10 + i)).ok());
  }
  ASSERT_TRUE(OpenOrDie(path));  // reopening replays the log into table files
  std::string sst;
  for (const auto& e : std::filesystem::directory_iterator(path)) {
    if (e.path().extension() == ".sst" && std::filesystem::file_size(e.path()) > 1024) sst = e.path().string();
  }
  ASSERT_FALSE(sst.empty()) << "no table file written";
  {
    const int fd = ::open(sst.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char byte = 0;
    ASSERT_EQ(::pread(fd, &byte, 1, 100), 1);
    byte = static_cast<char>(byte ^ 0x40);
    ASSERT_EQ(::pwrite(fd, &byte, 1, 100), 1);
    ::close(fd);
  }
  auto store = ResultStore::Open(path);
  ASSERT_FALSE(store.ok());
  const std::string& error = store.status().message();
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(error.rfind("result store " + path + ": checksum or corruption error", 0), 0u) << error;
  EXPECT_NE(error.find(std::filesystem::path(sst).filename().string()), std::string::npos) << error;
}

// Op records: one per (name, package), its time updated by a new submit;
// a store written before op records existed reads its ops from its sweeps,
// and has the records made when first opened for writing.
TEST(ResultStoreTest, OpRecordsAndTheirMakingFromAnOlderStoresSweeps) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  const OpPackage v1 = {{"op.toml", "v1"}, {"k.cu", "x"}};
  const OpPackage v2 = {{"op.toml", "v2"}, {"k.cu", "x"}};
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store);
    SweepRecord rec;
    rec.state = "done";
    rec.submit.ops = {"gemm"};
    rec.submit.op_packages = {v1};
    ASSERT_TRUE(store->PutSweep("6b000000-abcd", EncodeSweepRecord(rec)).ok());
  }
  // As a store of an older build: op records never made.
  EditRaw(path, [](rocksdb::DB* db, std::map<std::string, rocksdb::ColumnFamilyHandle*>& cf) {
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), cf.at("meta"), "ops_indexed").ok());
  });
  auto ops_of = [](ResultStore& store) {
    std::map<std::string, int64_t> out;  // op.toml contents -> submitted
    EXPECT_TRUE(store.ForEachOp([&](const OpRecord& op) {
      EXPECT_EQ(op.name, "gemm");
      out[op.package.at("op.toml")] = op.submitted_unix;
    }).ok());
    return out;
  };
  {
    auto read_only = ResultStore::OpenReadOnly(path);
    ASSERT_TRUE(read_only.ok()) << read_only.status().message();
    EXPECT_EQ(ops_of(**read_only), (std::map<std::string, int64_t>{{"v1", 0x6b000000}}));
  }
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(ops_of(*store), (std::map<std::string, int64_t>{{"v1", 0x6b000000}}));
  ASSERT_TRUE(store->PutOp("gemm", 0x6c000000, v1).ok());
  ASSERT_TRUE(store->PutOp("gemm", 0x6d000000, v2).ok());
  EXPECT_EQ(ops_of(*store), (std::map<std::string, int64_t>{{"v1", 0x6c000000}, {"v2", 0x6d000000}}));
  EXPECT_FALSE(store->PutOp("", 1, v1).ok());
  EXPECT_EQ(SweepSubmittedUnix("6b000000-abcd"), 0x6b000000);
  EXPECT_EQ(SweepSubmittedUnix("0001-test"), 1);
  EXPECT_EQ(SweepSubmittedUnix("sweep-1"), 0);
  EXPECT_EQ(SweepSubmittedUnix("6b000000"), 0);
}

// A sweep record keeps an ended sweep's progress (for `status` after a
// restart); records without one (running sweeps, older stores) still read,
// and a state line that lies about the submit's size is refused.
TEST(ResultStoreTest, SweepRecordsCarryAnEndedSweepsProgress) {
  SweepRecord rec;
  rec.state = "done";
  rec.submit.name = "nightly";
  rec.submit.ops = {"gemm"};
  auto old_form = DecodeSweepRecord(EncodeSweepRecord(rec));
  ASSERT_TRUE(old_form.ok()) << old_form.status().message();
  EXPECT_EQ(old_form->state, "done");
  EXPECT_FALSE(old_form->progress.has_value());
  SweepProgress p;
  p.sweep_id = "6b000000-abcd";
  p.name = "nightly";
  p.state = "done";
  p.pairs_total = p.pairs_done = 296;
  p.failed_by_class["timeout"] = 3;
  rec.progress = p;
  const std::string bytes = EncodeSweepRecord(rec);
  auto back = DecodeSweepRecord(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->state, "done");
  EXPECT_EQ(back->submit.name, "nightly");
  ASSERT_TRUE(back->progress.has_value());
  EXPECT_EQ(back->progress->pairs_done, 296u);
  EXPECT_EQ(back->progress->failed_by_class.at("timeout"), 3u);
  for (const std::string& bad : {std::string("done;99999999\n") + bytes.substr(bytes.find('\n') + 1),
                                 std::string("done;x\n") + bytes.substr(bytes.find('\n') + 1),
                                 bytes.substr(0, bytes.size() - 3)}) {
    EXPECT_FALSE(DecodeSweepRecord(bad).ok());
  }
}

TEST(ResultStoreTest, RecoverIsOkOnAWritableStore) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->Recover().ok());
}

TEST(ResultStoreTest, Sweeps) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->GetSweep("s-1"));
  ASSERT_TRUE(store->PutSweep("s-2", "two").ok());
  ASSERT_TRUE(store->PutSweep("s-1", "one").ok());
  ASSERT_TRUE(store->PutSweep("s-1", "one-updated").ok());
  EXPECT_EQ(store->GetSweep("s-1"), "one-updated");
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(store->ForEachSweep([&](const std::string& id, const std::string& b) {
                     all.emplace_back(id, b);
                   })
                  .ok());
  EXPECT_EQ(all, (std::vector<std::pair<std::string, std::string>>{{"s-1", "one-updated"},
                                                                    {"s-2", "two"}}));
  EXPECT_FALSE(store->PutSweep("", "x").ok());
  EXPECT_EQ(*store->CountResults(), 0u) << "sweeps never show up as results";
}

TEST(ResultStoreTest, CountersCountAcrossReopensAndNeverOnAReader) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store);
    EXPECT_EQ(*store->IncrementCounter("runs"), 1u);
    EXPECT_EQ(*store->IncrementCounter("runs"), 2u);
    EXPECT_EQ(*store->IncrementCounter("other"), 1u) << "counters are independent";
    EXPECT_EQ(*store->CountResults(), 0u) << "counters never show up as results";
  }
  {
    auto reader = ResultStore::OpenReadOnly(path);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    EXPECT_FALSE((*reader)->IncrementCounter("runs").ok());
  }
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->IncrementCounter("runs"), 3u) << "the count survives a reopen";
}

TEST(ResultStoreTest, SecondOpenInThisProcessFailsCleanly) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  auto first = OpenOrDie(path);
  ASSERT_TRUE(first);
  auto second = ResultStore::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("locked"), std::string::npos) << second.status().message();
  EXPECT_NE(second.status().message().find(path), std::string::npos) << second.status().message();
}

// Another process holding the store's LOCK file (as a running coordinator
// does): the child takes the same POSIX record lock RocksDB takes.
TEST(ResultStoreTest, StoreLockedByAnotherProcessFailsCleanly) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_TRUE(OpenOrDie(path)); }

  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open((path + "/LOCK").c_str(), O_RDWR);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char ok = (fd >= 0 && ::fcntl(fd, F_SETLK, &fl) == 0) ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
    char c;
    if (::read(release[0], &c, 1) < 0) ::_exit(3);
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  auto locked = ResultStore::Open(path);
  const char go = 'x';
  ASSERT_EQ(::write(release[1], &go, 1), 1);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);

  ASSERT_FALSE(locked.ok());
  EXPECT_NE(locked.status().message().find("locked"), std::string::npos) << locked.status().message();
  EXPECT_NE(locked.status().message().find(path), std::string::npos);
  // Once the other process is gone the store opens normally.
  EXPECT_TRUE(OpenOrDie(path));
}

TEST(ResultStoreTest, UnknownFormatVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_TRUE(OpenOrDie(path)); }
  // Stamp the store as if a future build had written it.
  EditRaw(path, [](rocksdb::DB* db, auto& cf) { ASSERT_TRUE(db->Put({}, cf["meta"], "format_version", "99").ok()); });
  auto r = ResultStore::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("99"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
}

TEST(ResultStoreTest, ConcurrentDuplicatePutsStoreOnce) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("db"));
  ASSERT_TRUE(store);
  std::atomic<int> added{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto r = store->Put(M("h100", "gemm", kS1, "c" + std::to_string(i), 10.0 + i));
        if (r.ok() && *r) ++added;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(added.load(), 50);
  EXPECT_EQ(*store->CountResults(), 50u);
}

// ---------------------------------------------------------------------------
// Durability: what a stop leaves in the write-ahead log, and what a damaged
// or missing log does to the next open.

constexpr int kWalRows = 297;

// A store stopped uncleanly with rows only in its WAL: written by a live
// handle and copied, folder and all, while that handle still has it open
// (what a crash leaves on disk). A synced write (a sweep) after the first
// half of the rows raises the durable marker past them.
std::string UncleanCopy(const TempDir& dir) {
  const std::string live = dir.Sub("live"), copy = dir.Sub("crashed");
  auto store = OpenOrDie(live);
  if (!store) return copy;
  for (int i = 0; i < kWalRows; ++i) {
    EXPECT_TRUE(store->Put(M("h100", "gemm", kS1, "c" + std::to_string(i), 10 + i)).ok());
    if (i == kWalRows / 2) {
      EXPECT_TRUE(store->PutSweep("s-1", "running").ok());
    }
  }
  fs::copy(live, copy, fs::copy_options::recursive);
  return copy;
}

// The store's WAL files, largest first.
std::vector<std::string> WalFiles(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.path().extension() == ".log") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return fs::file_size(a) > fs::file_size(b); });
  return out;
}

TEST(ResultStoreDurabilityTest, AFlippedByteInTheWalIsRefusedNamingTheFile) {
  TempDir dir;
  const std::string path = UncleanCopy(dir);
  const auto wals = WalFiles(path);
  ASSERT_FALSE(wals.empty());
  ASSERT_GT(fs::file_size(wals[0]), 64u << 10) << "the rows should span several WAL blocks";
  {
    const int fd = ::open(wals[0].c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const off_t middle = static_cast<off_t>(fs::file_size(wals[0]) / 2);
    char byte = 0;
    ASSERT_EQ(::pread(fd, &byte, 1, middle), 1);
    byte = static_cast<char>(byte ^ 0x40);
    ASSERT_EQ(::pwrite(fd, &byte, 1, middle), 1);
    ::close(fd);
  }
  const std::string wal_name = fs::path(wals[0]).filename().string();
  for (bool read_only : {false, true}) {
    auto store = read_only ? ResultStore::OpenReadOnly(path) : ResultStore::Open(path);
    ASSERT_FALSE(store.ok()) << (read_only ? "read-only: " : "") << "a damaged WAL was replayed in part";
    const std::string& error = store.status().message();
    EXPECT_EQ(store.status().code(), StatusCode::kCorruption) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_EQ(error.rfind("result store " + path + ": write-ahead log " + wal_name + " is corrupt", 0), 0u) << error;
    EXPECT_NE(error.find("--store-recover"), std::string::npos) << error;
  }
  // Refusing changed nothing: the operator's explicit recovery keeps what
  // the undamaged records hold, and says how much.
  auto store = ResultStore::Open(path, StoreOpenOptions{.recover = true});
  ASSERT_TRUE(store.ok()) << store.status().message();
  const uint64_t rows = *(*store)->CountResults();
  EXPECT_GT(rows, 0u);
  EXPECT_LT(rows, static_cast<uint64_t>(kWalRows));
  const std::string& report = (*store)->recovery_report();
  EXPECT_NE(report.find(wal_name), std::string::npos) << report;
  EXPECT_NE(report.find("kept " + std::to_string(rows) + " result rows"), std::string::npos) << report;
  store->reset();
  // Recovered once, the store opens as any other.
  auto again = OpenOrDie(path);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again->CountResults(), rows);
  EXPECT_EQ(again->recovery_report(), "");
}

TEST(ResultStoreDurabilityTest, AStoreThatLostItsWalAfterAnUncleanStopIsRefused) {
  TempDir dir;
  const std::string path = UncleanCopy(dir);
  const std::string marker = path + "/" + kStoreDurableMarker;
  ASSERT_TRUE(fs::exists(marker));
  for (const auto& wal : WalFiles(path)) fs::remove(wal);
  for (bool read_only : {false, true}) {
    auto store = read_only ? ResultStore::OpenReadOnly(path) : ResultStore::Open(path);
    ASSERT_FALSE(store.ok()) << (read_only ? "read-only: " : "") << "a store that went backwards was opened";
    const std::string& error = store.status().message();
    EXPECT_EQ(store.status().code(), StatusCode::kCorruption) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_NE(error.find(marker), std::string::npos) << error;
    EXPECT_NE(error.find("ends at sequence 0 "), std::string::npos) << error;
    EXPECT_NE(error.find("--store-recover"), std::string::npos) << error;
  }
  auto store = ResultStore::Open(path, StoreOpenOptions{.recover = true});
  ASSERT_TRUE(store.ok()) << store.status().message();
  EXPECT_NE((*store)->recovery_report().find("below the"), std::string::npos) << (*store)->recovery_report();
  EXPECT_NE((*store)->recovery_report().find("kept 0 result rows"), std::string::npos)
      << (*store)->recovery_report();
  store->reset();
  EXPECT_TRUE(OpenOrDie(path)) << "the marker was not reset by the recovery";

  // A marker that is not one is refused too, not ignored.
  { std::ofstream(marker) << "durable_sequence 12x\n"; }
  auto garbled = ResultStore::Open(path);
  ASSERT_FALSE(garbled.ok());
  EXPECT_NE(garbled.status().message().find(marker), std::string::npos) << garbled.status().message();
  EXPECT_TRUE(ResultStore::Open(path, StoreOpenOptions{.recover = true}).ok());
}

TEST(ResultStoreDurabilityTest, ACleanCloseLeavesNothingOnlyInTheWal) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store);
    for (int i = 0; i < kWalRows; ++i) {
      ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c" + std::to_string(i), 10 + i)).ok());
    }
    ASSERT_TRUE(store->PutSweep("s-1", "done").ok());
    ASSERT_TRUE(store->Close().ok());
    EXPECT_TRUE(store->Close().ok()) << "a second Close is a no-op";
  }
  for (const auto& wal : WalFiles(path)) fs::remove(wal);
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->CountResults(), static_cast<uint64_t>(kWalRows));
  EXPECT_EQ(store->GetSweep("s-1"), "done");
  auto best = store->Best(Filter("h100"));
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].config_id, "c0");
  store.reset();  // the destructor closes as cleanly
  for (const auto& wal : WalFiles(path)) fs::remove(wal);
  store = OpenOrDie(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->CountResults(), static_cast<uint64_t>(kWalRows));
}

TEST(ResultStoreDurabilityTest, TheDiskReserveHasAFloor) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.Sub("db"));
    ASSERT_TRUE(store);
    store->set_min_free_bytes(0);
    EXPECT_EQ(store->min_free_bytes(), kMinStoreReserveBytes);
    store->set_min_free_bytes(kMinStoreReserveBytes + 1);
    EXPECT_EQ(store->min_free_bytes(), kMinStoreReserveBytes + 1);
  }
  // On a small filesystem: a reserve of 0 still stops writes short of a
  // full disk (where RocksDB would abort the process).
  const std::string mnt = dir.Sub("small");
  fs::create_directories(mnt);
  // Roomy enough for RocksDB's preallocated WAL (about 70 MiB).
  if (std::system(("mount -t tmpfs -o size=256m tmpfs " + mnt + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  }
  struct Unmount {
    std::string at;
    ~Unmount() { (void)!std::system(("umount -l " + at).c_str()); }
  } unmount{mnt};
  auto store = OpenOrDie(mnt + "/db");
  ASSERT_TRUE(store);
  store->set_min_free_bytes(0);
  ASSERT_TRUE(store->Put(M("h100", "gemm", kS1, "c0", 10)).ok());
  {
    struct statvfs fs {};
    ASSERT_EQ(::statvfs(mnt.c_str(), &fs), 0);
    const uint64_t free_mib = (static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize) >> 20;
    ASSERT_GT(free_mib, 64u);
    std::ofstream filler(mnt + "/filler", std::ios::binary);
    const std::string mib(1 << 20, 'x');
    for (uint64_t i = 0; i + 32 < free_mib; ++i) filler << mib;  // leaves about 32 MiB
  }
  auto refused = store->Put(M("h100", "gemm", kS1, "c1", 11));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().message();
  EXPECT_NE(refused.status().message().find("disk nearly full"), std::string::npos) << refused.status().message();
  fs::remove(mnt + "/filler");
  EXPECT_TRUE(store->Put(M("h100", "gemm", kS1, "c1", 11)).ok());
  EXPECT_TRUE(store->Close().ok());
}

// Near-ties publish the same winner whatever their order: the smaller
// config id among the configs within 1%; a config faster by more still
// wins, even where the CIs overlap.
TEST(StableWinners, NearTiesGoToTheSmallerConfigIdAndRealGainsWin) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/db");
  auto row = [](const std::string& id, double us, double ci) {
    Measurement m = M("h100", "gemm", "M=1", id, us);
    m.config.params = {{"BM", id == "aaaa" ? 64 : id == "bbbb" ? 128 : 256}};
    m.ci95_us = ci;
    return m;
  };
  ASSERT_TRUE(store->Put(row("bbbb", 100.0, 0.2)).ok());  // the fastest
  ASSERT_TRUE(store->Put(row("aaaa", 100.6, 0.2)).ok());  // 0.6% behind: a tie
  auto best = store->Best({});
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ(best->at(0).config_id, "bbbb");
  EXPECT_EQ(StableWinners(*store, *best).at(0).config_id, "aaaa");
  // A config measured far less precisely (a CI of 8%) does not take it.
  ASSERT_TRUE(store->Put(row("0000", 100.4, 8.0)).ok());
  EXPECT_EQ(StableWinners(*store, *store->Best({})).at(0).config_id, "aaaa");
  // A precise one 1.5% behind, its CI overlapping the best's, is no tie.
  ASSERT_TRUE(store->Put(row("1111", 101.5, 1.5)).ok());
  EXPECT_EQ(StableWinners(*store, *store->Best({})).at(0).config_id, "aaaa");
  // 3% faster is no tie.
  ASSERT_TRUE(store->Put(row("cccc", 97.0, 0.2)).ok());
  EXPECT_EQ(StableWinners(*store, *store->Best({})).at(0).config_id, "cccc");
}

}  // namespace
}  // namespace tune

namespace tune {
namespace {

// The bound on op package bytes in all (MakeRoomForOps): a submit past it
// has the packages that nothing needs pruned, oldest first, and is refused
// with a line when what stays is still too much. A package stays while a
// running sweep uses it and once a row was measured with it (publish finds
// a row's spec by kernel hash).
TEST(ResultStoreTest, OpPackagesAreBoundInAllKeepingWhatSweepsAndRowsNeed) {
  TempDir dir;
  auto store = OpenOrDie(dir.Sub("store"));
  ASSERT_TRUE(store);
  auto base = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
  ASSERT_TRUE(base.ok()) << base.status().message();
  auto version = [&](char c) {
    OpPackage p = *base;
    p["data.bin"] = std::string(100 << 10, c);
    p["synthetic.cu"] += std::string("\n// version ") + c + "\n";  // another kernel hash
    return p;
  };
  const OpPackage a = version('a'), b = version('b'), c = version('c'), d = version('d'), e = version('e');
  ASSERT_TRUE(store->PutOp("synthetic", 1, a).ok());
  ASSERT_TRUE(store->PutOp("synthetic", 2, b).ok());
  ASSERT_TRUE(store->PutOp("synthetic", 3, c).ok());
  // A row measured with `a`, on the sim toolchain.
  auto spec_a = ParseOpSpec(a, "a");
  ASSERT_TRUE(spec_a.ok()) << spec_a.status().message();
  Measurement row = M("sim-h100", "synthetic", "N=4096", "BLOCK=128", 10, FailureClass::kNone, OpHash(*spec_a, "sim"));
  row.dtype = "f32";
  row.config_id = row.config.Id();
  row.nvrtc_version = "sim";
  ASSERT_TRUE(store->Put(row).ok());
  auto stored = [&] {
    std::set<char> out;
    EXPECT_TRUE(store->ForEachOp([&](const OpRecord& op) { out.insert(op.package.at("data.bin")[0]); }).ok());
    return out;
  };
  const std::set<std::string> running = {PackageDigest(b)};
  // Room under the bound: nothing goes.
  auto room = store->MakeRoomForOps({{"synthetic", d}}, 1 << 20, running);
  ASSERT_TRUE(room.ok()) << room.status().message();
  EXPECT_EQ(*room, 0u);
  // 4 x ~100 KiB over 350 KiB: `c` (neither measured nor running) goes.
  room = store->MakeRoomForOps({{"synthetic", d}}, 350 << 10, running);
  ASSERT_TRUE(room.ok()) << room.status().message();
  EXPECT_EQ(*room, 1u);
  EXPECT_EQ(stored(), (std::set<char>{'a', 'b'}));
  ASSERT_TRUE(store->PutOp("synthetic", 4, d).ok());
  // Past 250 KiB even once `d` went: refused with the bound named; what
  // rows and running sweeps need stays.
  room = store->MakeRoomForOps({{"synthetic", e}}, 250 << 10, running);
  ASSERT_FALSE(room.ok());
  EXPECT_NE(room.status().message().find("over the bound of 250 KiB"), std::string::npos) << room.status().message();
  EXPECT_EQ(stored(), (std::set<char>{'a', 'b'}));
  // A package stored already is no new bytes.
  room = store->MakeRoomForOps({{"synthetic", a}}, 250 << 10, running);
  EXPECT_TRUE(room.ok()) << room.status().message();
  // Publish still finds the measured row's spec.
  EXPECT_EQ(OpsFromStore(*store).count("synthetic"), 1u);
}

}  // namespace
}  // namespace tune
