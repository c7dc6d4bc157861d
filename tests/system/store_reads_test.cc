// Remote reads (StoreRead) at a real coordinator process: exports are
// bounded while they are written, private to the coordinator's user, one
// client holds no more than its share, and what a killed coordinator left
// is gone when the next one starts.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "protocol/protocol.h"
#include "opspec/op_definition.h"
#include "store/result_store.h"
#include "support/process.h"
#include "support/protocol_peer.h"
#include "support/temp_dir.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using Peer = testing::ProtocolPeer;
using testing::Child;

class StoreReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(testing::FreePort());
    // The coordinator's temporary folder is this test's.
    fs::create_directories(dir_.Sub("tmp"));
    ::setenv("TMPDIR", dir_.Sub("tmp").c_str(), 1);
  }
  void TearDown() override {
    if (coordinator_) {
      EXPECT_EQ(coordinator_->Stop(10), 0) << Log();
    }
    ::unsetenv("TMPDIR");
  }
  std::string Store() const { return dir_.Sub("store"); }
  std::string Reads() const { return Store() + ".reads"; }
  std::string Log() const { return testing::ReadFile(dir_.Sub("coordinator.log")); }

  // A store of `rows` rows of op "synthetic", and its package with
  // `package_bytes` of data (an export carries the packages of its rows' ops).
  void Seed(int rows, size_t package_bytes) {
    auto store = ResultStore::Open(Store());
    ASSERT_TRUE(store.ok()) << store.status().message();
    auto pkg = ReadOpPackage(std::string(TUNEFARM_SOURCE_DIR) + "/tests/data/ops/synthetic");
    ASSERT_TRUE(pkg.ok()) << pkg.status().message();
    (*pkg)["data.bin"] = std::string(package_bytes, 'x');
    ASSERT_TRUE((*store)->PutOp("synthetic", 1, *pkg).ok());
    std::vector<Measurement> ms;
    for (int i = 0; i < rows; ++i) {
      Measurement m;
      m.gpu_model = "sim-a100";
      m.op = "synthetic";
      m.dtype = "f32";
      m.shape = "N=4096";
      m.kernel_hash = "kh";
      m.config.params = {{"BLOCK", i}};
      m.config_id = m.config.Id();
      m.check_passed = true;
      m.samples = 10;
      m.median_us = 10 + i;
      m.backend = "sim";
      m.worker = "w";
      ms.push_back(std::move(m));
    }
    size_t stored = 0;
    ASSERT_TRUE((*store)->PutBatch(ms, &stored).ok());
  }
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {TUNEFARM_BINARY, "coordinator", "--bind", endpoint_, "--store", Store(), "-v"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    coordinator_ = std::make_unique<Child>(argv, dir_.Sub("coordinator.log"));
    Peer probe(ctx_, endpoint_);
    probe.Send(SweepStatusRequest{});
    ASSERT_TRUE(probe.ReceiveAny().has_value()) << Log();
  }
  std::vector<std::string> ReadsFiles() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(Reads(), ec)) out.push_back(e.path().filename().string());
    return out;
  }
  static unsigned Mode(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  }

  testing::TempDir dir_;
  std::string endpoint_;
  zmq::context_t ctx_;
  std::unique_ptr<Child> coordinator_;
};

// An export is counted while it is written: one that passes the bound is
// stopped, its file removed, and the read refused with a line; a narrower
// read is answered.
TEST_F(StoreReadsTest, AnExportThatGrowsPastTheBoundIsRefusedAndRemoved) {
  Seed(3000, 1 << 10);
  Start({"--max-read-bytes", "65536"});
  Peer reader(ctx_, endpoint_);
  reader.Send(StoreRead{});
  const std::string error = reader.Receive<ErrorReply>().message;
  EXPECT_NE(error.find("the rows the filter selects make more than 64 KiB"), std::string::npos) << error;
  EXPECT_NE(error.find("--max-read-bytes"), std::string::npos) << error;
  EXPECT_TRUE(ReadsFiles().empty());
  reader.Send(StoreRead{ResultFilter{"no-such-model", "", "", "", ""}, "", 0});
  const StoreChunk narrow = reader.Receive<StoreChunk>();
  EXPECT_EQ(narrow.data.size(), narrow.total_bytes);
  EXPECT_TRUE(ReadsFiles().empty());  // read to its end: dropped
}

// Exports are the coordinator user's alone (folder 0700, files 0600), and
// one client (here: one address) has at most two made or held at once.
TEST_F(StoreReadsTest, ExportsArePrivateAndOneClientHoldsNoMoreThanItsShare) {
  Seed(10, size_t(20) << 20);  // an export over one piece: held until read
  Start();
  EXPECT_EQ(Mode(Reads()), 0700u);
  Peer first(ctx_, endpoint_), second(ctx_, endpoint_), third(ctx_, endpoint_);
  first.Send(StoreRead{});
  const StoreChunk piece = first.Receive<StoreChunk>();
  ASSERT_LT(piece.data.size(), piece.total_bytes);
  const std::vector<std::string> files = ReadsFiles();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(Mode(Reads() + "/" + files[0]), 0600u);
  second.Send(StoreRead{});
  const StoreChunk other = second.Receive<StoreChunk>();
  EXPECT_NE(other.export_id, piece.export_id);
  third.Send(StoreRead{});
  const std::string refused = third.Receive<ErrorReply>().message;
  EXPECT_NE(refused.find("the most one client may have"), std::string::npos) << refused;
  // Read to its end, the first export goes and its client may read again.
  first.Send(StoreRead{ResultFilter{}, piece.export_id, piece.data.size()});
  const StoreChunk rest = first.Receive<StoreChunk>();
  EXPECT_EQ(rest.offset + rest.data.size(), rest.total_bytes);
  third.Send(StoreRead{ResultFilter{"no-such-model", "", "", "", ""}, "", 0});
  (void)third.Receive<StoreChunk>();
}

// `results --coordinator` reads the farm's rows into its own memory: every
// row printed, nothing left in (or written to) the client's temporary folder.
TEST_F(StoreReadsTest, AReportReadsTheFarmsRowsInMemory) {
  Seed(12, 1 << 10);
  Start();
  const std::string client_tmp = dir_.Sub("client-tmp");
  fs::create_directories(client_tmp);
  ::setenv("TMPDIR", client_tmp.c_str(), 1);
  Child results({TUNEFARM_BINARY, "results", "--coordinator", endpoint_, "--format", "csv"}, dir_.Sub("results.log"));
  const int rc = results.Wait(120);
  ::setenv("TMPDIR", dir_.Sub("tmp").c_str(), 1);
  const std::string out = testing::ReadFile(dir_.Sub("results.log"));
  ASSERT_EQ(rc, 0) << out;
  size_t rows = 0;
  for (size_t at = out.find("\nsim-a100,"); at != std::string::npos; at = out.find("\nsim-a100,", at + 1)) ++rows;
  EXPECT_EQ(rows, 12u) << out;
  EXPECT_TRUE(fs::is_empty(client_tmp));
}

// `search replay --coordinator` scores strategies against the farm's
// exhaustive keys, read into memory as every report's rows are.
TEST_F(StoreReadsTest, SearchReplayReadsTheFarmsExhaustiveKeys) {
  Seed(12, 1 << 10);
  {
    auto store = ResultStore::Open(Store());
    ASSERT_TRUE(store.ok()) << store.status().message();
    KeyCoverage c;
    c.gpu_model = "sim-a100";
    c.op = "synthetic";
    c.dtype = "f32";
    c.shape = "N=4096";
    c.kernel_hash = "kh";
    c.legal = c.evaluated = 12;
    c.strategy = "exhaustive/1";
    c.state = KeyCoverage::State::kExhausted;
    ASSERT_TRUE((*store)->PutCoverage(c).ok());
  }
  Start();
  Child replay({TUNEFARM_BINARY, "search", "replay", "--coordinator", endpoint_, "--strategy", "random", "--seeds",
                "3", "--format", "json"},
               dir_.Sub("replay.log"));
  const int rc = replay.Wait(120);
  const std::string out = testing::ReadFile(dir_.Sub("replay.log"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"random/1\""), std::string::npos) << out;
  EXPECT_NE(out.find("sim-a100"), std::string::npos) << out;
}

// What a coordinator killed mid-read left (its store's exports folder, and a
// dead coordinator's folder of the older layout in the temporary folder) is
// removed when one starts; a living process's folder is not.
TEST_F(StoreReadsTest, LeftoverExportsOfAKilledCoordinatorAreRemovedAtStart) {
  Seed(10, 1 << 10);
  fs::create_directories(Reads());
  std::ofstream(Reads() + "/1-12345.tfx") << "half an export";
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string old_dead = dir_.Sub("tmp/tunefarm-reads-" + std::to_string(dead) + "-42");
  const std::string old_alive = dir_.Sub("tmp/tunefarm-reads-" + std::to_string(::getpid()) + "-43");
  for (const std::string& d : {old_dead, old_alive}) {
    fs::create_directories(d);
    std::ofstream(d + "/1-1.tfx") << "rows";
  }
  Start();
  EXPECT_TRUE(ReadsFiles().empty());
  EXPECT_EQ(Mode(Reads()), 0700u);
  EXPECT_FALSE(fs::exists(old_dead));
  EXPECT_TRUE(fs::exists(old_alive + "/1-1.tfx"));
  EXPECT_EQ(coordinator_->Stop(10), 0) << Log();
  coordinator_.reset();
  EXPECT_FALSE(fs::exists(Reads()));  // a clean stop takes its folder with it
}

}  // namespace
}  // namespace tune
