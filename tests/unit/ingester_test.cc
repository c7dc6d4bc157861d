// Ingester: Results frames stored off the socket loop, against a real
// ResultStore in a temporary directory.
#include "ingester.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <filesystem>

namespace tune {
namespace {

namespace fs = std::filesystem;

Measurement Row(const std::string& gpu, const std::string& config_id, bool passed = true) {
  Measurement m;
  m.gpu_model = gpu;
  m.op = "gemm";
  m.dtype = "f16";
  m.shape = "N=1024";
  m.kernel_hash = "kh";
  m.config_id = config_id;
  m.check_passed = passed;
  m.failure = passed ? FailureClass::kNone : FailureClass::kWrongResult;
  m.samples = 5;
  m.median_us = 10;
  return m;
}

zmq::message_t Frame(uint64_t batch, std::vector<Measurement> rows, bool final = false) {
  Envelope env;
  env.sender = "w";
  env.command = Results{"s1", 7, batch, final, std::move(rows)};
  const std::string bytes = EncodeEnvelope(env);
  return zmq::message_t(bytes.data(), bytes.size());
}

IngestJob Job(zmq::message_t frame) {
  IngestJob job;
  job.identity = "id-1";
  job.worker = "host:1";
  job.gpu_models = {"h100"};
  job.unit_op = "gemm";
  job.unit_dtype = "f16";
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
  ingester_->Submit(Job(Frame(0, {Row("h100", "c1"), Row("h100", "c2", false)})));
  ingester_->Submit(Job(Frame(1, {Row("h100", "c2", false), Row("h100", "c3")}, true)));
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
  EXPECT_EQ(out[1].stored, 1u);  // c2 was stored by the first batch
  EXPECT_EQ(ingester_->queued_bytes(), 0u);
  auto row = store_->Get("h100", "gemm", "f16", "N=1024", "kh", "c3");
  ASSERT_TRUE(row.has_value());  // stored before its outcome was posted
  EXPECT_EQ(row->worker, "host:1");
  EXPECT_EQ(row->sweep_id, "s1");
}

TEST_F(IngesterTest, RejectsFramesTheSenderMayNotSendAndStoresNothingOfThem) {
  ingester_->Submit(Job(Frame(0, {Row("h100", "c1"), Row("a100", "c2")})));
  IngestJob other_op = Job(Frame(1, {Row("h100", "c3")}));
  other_op.unit_op = "softmax";
  ingester_->Submit(std::move(other_op));
  const std::string garbage(64, '\x5a');
  ingester_->Submit(Job(zmq::message_t(garbage.data(), garbage.size())));
  const auto out = Take(3);
  ASSERT_EQ(out.size(), 3u);
  for (const auto& o : out) EXPECT_EQ(o.kind, IngestOutcome::Kind::kRejected);
  EXPECT_NE(out[0].error.find("a100"), std::string::npos) << out[0].error;
  EXPECT_NE(out[1].error.find("softmax"), std::string::npos) << out[1].error;
  EXPECT_NE(out[2].error.find("malformed"), std::string::npos) << out[2].error;
  auto count = store_->CountResults();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 0u);
}

TEST(RowsToStore, AUnitTheCoordinatorDoesNotKnowTakesAnyOpOfTheSendersModels) {
  IngestJob job;
  job.worker = "host:2";
  job.gpu_models = {"h100"};
  Results r{"s9", 3, 0, false, {Row("h100", "c1")}};
  r.measurements[0].op = "softmax";
  auto rows = RowsToStore(job, r);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].sweep_id, "s9");
  EXPECT_EQ((*rows)[0].worker, "host:2");
}

}  // namespace
}  // namespace tune
