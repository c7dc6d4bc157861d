#include "zap_authenticator.h"

#include "base/clock.h"
#include "base/log.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <zmq.hpp>

namespace tune {
namespace {

// Fixed by RFC 27: libzmq connects every socket's ZAP client here.
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr const char* kZapVersion = "1.0";
// How long Stop() may wait for the handler thread to notice.
constexpr std::chrono::milliseconds kPollInterval{100};
constexpr double kRefusalLogSeconds = 60;
constexpr int kBindAttempts = 10;
constexpr std::chrono::milliseconds kBindRetryInterval{50};
// Bounds the per-key refusal bookkeeping against a flood of fresh keys.
constexpr size_t kMaxTrackedRefusals = 4096;

// One ZMTP metadata property, as ZAP replies carry them.
std::string Property(const std::string& name, const std::string& value) {
  std::string out;
  out += static_cast<char>(name.size());
  out += name;
  const uint32_t n = static_cast<uint32_t>(value.size());
  out += static_cast<char>(n >> 24);
  out += static_cast<char>(n >> 16);
  out += static_cast<char>(n >> 8);
  out += static_cast<char>(n);
  out += value;
  return out;
}

// ctime too: a chmod that makes a list unreadable changes nothing else.
struct FileStamp {
  bool exists = false;
  ino_t inode = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

FileStamp StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, st.st_ino, st.st_size,
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

}  // namespace

struct ZapAuthenticator::State {
  zmq::context_t& ctx;
  ZapAuthenticatorOptions options;

  mutable std::mutex mu;
  std::map<std::string, AllowedKey> allowed;  // Z85 key -> its entry
  FileStamp stamp, client_stamp, builder_stamp;  // of the lists in force

  std::mutex lifecycle_mu;  // serialises Start/Stop
  std::thread thread;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> accepted{0}, refused{0};

  struct Refusals {
    double last_logged = 0;
    uint64_t since_logged = 0;
  };
  std::map<std::string, Refusals> refusals;  // handler thread only

  State(zmq::context_t& c, ZapAuthenticatorOptions o) : ctx(c), options(std::move(o)) {
    if (!options.log) {
      options.log = [](const std::string& line) { log::Warn("zap", line); };
    }
  }

  // A key has one role: one on both lists is an error, not a guess.
  Status Set(std::vector<AllowedKey> keys) {
    std::map<std::string, AllowedKey> m;
    for (auto& k : keys) {
      auto [it, inserted] = m.emplace(k.public_z85, k);
      if (!inserted && it->second.role != k.role) {
        return Status::Error("zap: key " + k.public_z85 + " is on both the " + PeerRoleName(it->second.role) +
                             " and the " + PeerRoleName(k.role) + " allow-list");
      }
    }
    std::lock_guard lock(mu);
    allowed = std::move(m);
    return Status::OK();
  }

  // At start-up both lists must be right as a whole (LoadCurveAllowList):
  // a typo is a refusal to start, which the operator sees at once.
  Status LoadStrict() {
    const std::string& path = options.allow_list_path;
    if (path.empty()) return Status::Error("zap: no allow-list file to load");
    const FileStamp before = StampOf(path);
    const FileStamp client_before = StampOf(options.client_allow_list_path);
    const FileStamp builder_before = StampOf(options.builder_allow_list_path);
    auto keys = LoadCurveAllowList(path, PeerRole::kWorker);
    if (!keys.ok()) return keys.status();
    for (const auto& [file, role] : {std::pair{&options.client_allow_list_path, PeerRole::kClient},
                                     std::pair{&options.builder_allow_list_path, PeerRole::kBuilder}}) {
      if (file->empty()) continue;
      auto more = LoadCurveAllowList(*file, role);
      if (!more.ok()) return more.status();
      keys->insert(keys->end(), more->begin(), more->end());
    }
    TUNE_RETURN_IF_ERROR(Set(std::move(*keys)));
    std::lock_guard lock(mu);
    stamp = before;
    client_stamp = client_before;
    builder_stamp = builder_before;
    return Status::OK();
  }

  // A re-read fails closed: the list in force becomes exactly the keys the
  // files now hold. Keeping the previous list on a bad edit would let a
  // revoked key stay in (and reconnect) for as long as the file has a typo,
  // and emptying the file would revoke nobody. So an empty file admits
  // nobody of its role; a malformed line is skipped and logged with its
  // file and line, the other lines count; a key on both lists is admitted
  // as neither. A file that cannot be read at all (deleted, permissions,
  // not a regular file: a FIFO is refused, never waited on) counts as
  // empty too: on a security list a missing answer must not mean
  // "as before", and the cost (the role's peers reconnect once the file is
  // back, after the next check) is an outage the operator can see and end,
  // while a revocation that silently does not happen is not. Replace the
  // files atomically (write, then rename), as tooling does, so that a
  // half-written file is never read.
  Status Reread() {
    const std::string& path = options.allow_list_path;
    if (path.empty()) return Status::Error("zap: no allow-list file to reload");
    const FileStamp before = StampOf(path);
    const FileStamp client_before = StampOf(options.client_allow_list_path);
    const FileStamp builder_before = StampOf(options.builder_allow_list_path);
    std::vector<std::string> problems;
    std::vector<AllowedKey> keys;
    auto read = [&](const std::string& file, PeerRole role) {
      auto list = ReadCurveAllowList(file, role);
      if (!list.ok()) {
        problems.push_back(list.status().message() + "; no " + PeerRoleName(role) +
                           " is admitted until it can be read");
        return;
      }
      for (const auto& p : list->problems) problems.push_back(p + " (line skipped)");
      keys.insert(keys.end(), list->keys.begin(), list->keys.end());
    };
    read(path, PeerRole::kWorker);
    if (!options.client_allow_list_path.empty()) read(options.client_allow_list_path, PeerRole::kClient);
    if (!options.builder_allow_list_path.empty()) read(options.builder_allow_list_path, PeerRole::kBuilder);
    std::map<std::string, AllowedKey> m;
    std::map<std::string, std::string> both;  // key -> "the worker and the client"
    for (auto& k : keys) {
      auto [it, inserted] = m.emplace(k.public_z85, k);
      if (!inserted && it->second.role != k.role)
        both.emplace(k.public_z85, std::string("the ") + PeerRoleName(it->second.role) + " and the " + PeerRoleName(k.role));
    }
    for (const auto& [key, lists] : both) {
      if (m.erase(key)) {
        problems.push_back("zap: key " + key + " is on both " + lists + " allow-list; admitted as neither");
      }
    }
    const size_t n = m.size();
    {
      std::lock_guard lock(mu);
      allowed = std::move(m);
      stamp = before;
      client_stamp = client_before;
      builder_stamp = builder_before;
    }
    for (const auto& p : problems) options.log(p);
    options.log("allow-list " + path +
                (options.client_allow_list_path.empty() ? "" : " and " + options.client_allow_list_path) +
                (options.builder_allow_list_path.empty() ? "" : " and " + options.builder_allow_list_path) +
                " loaded: " + std::to_string(n) + " key(s)" +
                (problems.empty() ? "" : ", " + std::to_string(problems.size()) + " problem(s) logged"));
    if (problems.empty()) return Status::OK();
    return Status::Error(problems.front() +
                         (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more)" : ""));
  }

  void MaybeReload() {
    if (options.allow_list_path.empty()) return;
    const FileStamp now = StampOf(options.allow_list_path);
    const FileStamp client_now = StampOf(options.client_allow_list_path);
    const FileStamp builder_now = StampOf(options.builder_allow_list_path);
    {
      std::lock_guard lock(mu);
      if (now == stamp && client_now == client_stamp && builder_now == builder_stamp) return;
      // Whatever the outcome, do not retry until a file changes again.
      stamp = now;
      client_stamp = client_now;
      builder_stamp = builder_now;
    }
    (void)Reread();  // it logs what it could not apply
  }

  void LogRefusal(const std::string& who, const std::string& address, const std::string& why) {
    const double now = NowSeconds();
    if (refusals.size() >= kMaxTrackedRefusals && !refusals.count(who)) refusals.clear();
    Refusals& r = refusals[who];
    if (r.last_logged != 0 && now - r.last_logged < kRefusalLogSeconds) {
      ++r.since_logged;
      return;
    }
    std::string line = "refused " + who + " from " + (address.empty() ? "?" : address) + ": " + why;
    if (r.since_logged) {
      line += " (" + std::to_string(r.since_logged) + " more refusal(s) since the last report)";
    }
    options.log(line);
    r.last_logged = now;
    r.since_logged = 0;
  }

  // Answers one ZAP request. Frames (RFC 27): version, request id, domain,
  // address, routing id, mechanism, credentials...
  std::vector<std::string> Decide(const std::vector<zmq::message_t>& req) {
    auto frame = [&](size_t i) { return i < req.size() ? req[i].to_string() : std::string(); };
    const std::string request_id = frame(1);
    auto reply = [&](const char* code, const std::string& text, const std::string& user,
                     const std::string& metadata) {
      return std::vector<std::string>{kZapVersion, request_id, code, text, user, metadata};
    };
    if (req.size() < 6 || frame(0) != kZapVersion) {
      refused.fetch_add(1);
      options.log("malformed ZAP request (" + std::to_string(req.size()) + " frames)");
      return reply("500", "malformed ZAP request", "", "");
    }
    const std::string address = frame(3);
    const std::string mechanism = frame(5);
    if (mechanism != "CURVE") {
      refused.fetch_add(1);
      LogRefusal("a " + mechanism + " client", address, "only CURVE clients are admitted");
      return reply("400", "mechanism not accepted", "", "");
    }
    if (req.size() != 7 || req[6].size() != 32) {
      refused.fetch_add(1);
      LogRefusal("a CURVE client", address, "malformed credentials");
      return reply("400", "malformed credentials", "", "");
    }
    char z85[41] = {};
    zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
    const std::string key = z85;
    std::string name;
    bool ok;
    {
      std::lock_guard lock(mu);
      auto it = allowed.find(key);
      ok = it != allowed.end();
      if (ok) name = it->second.name;
    }
    if (!ok) {
      refused.fetch_add(1);
      LogRefusal("CURVE key " + key, address, "not on the allow-list");
      return reply("400", "key not on the allow-list", "", "");
    }
    accepted.fetch_add(1);
    refusals.erase(key);
    if (options.log_accepted) {
      options.log("admitted CURVE key " + key + (name.empty() ? "" : " (" + name + ")") + " from " +
                  address);
    }
    return reply("200", "OK", key, name.empty() ? "" : Property("Key-Name", name));
  }

  void Run(zmq::socket_t sock) {
    double next_reload = NowSeconds() + options.reload_check_seconds;
    while (!stop.load()) {
      try {
        zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, 1, kPollInterval);
        if (items[0].revents & ZMQ_POLLIN) {
          std::vector<zmq::message_t> req;
          do {
            zmq::message_t m;
            if (!sock.recv(m, zmq::recv_flags::none)) break;
            req.push_back(std::move(m));
          } while (sock.get(zmq::sockopt::rcvmore));
          const auto rep = Decide(req);
          for (size_t i = 0; i < rep.size(); ++i) {
            sock.send(zmq::buffer(rep[i]),
                      i + 1 < rep.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
          }
        }
      } catch (const zmq::error_t& e) {
        // A signal for the process (SIGTERM, SIGCHLD) interrupts the poll:
        // keep answering, or the context would be left without a handler.
        if (e.num() == EINTR) continue;
        // ETERM: the context is shutting down and its sockets with it.
        if (e.num() != ETERM) {
          options.log(std::string("ZAP handler failed, CURVE clients are no longer checked: ") +
                      e.what());
        }
        break;
      }
      if (const double now = NowSeconds(); now >= next_reload) {
        MaybeReload();
        next_reload = now + options.reload_check_seconds;
      }
    }
    sock.close();
  }
};

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx, std::vector<AllowedKey> allowed,
                                   ZapAuthenticatorOptions options)
    : state_(std::make_unique<State>(ctx, std::move(options))) {
  Status st = state_->Set(std::move(allowed));
  if (!st.ok()) state_->options.log(st.message() + "; nobody is admitted");
  if (!state_->options.allow_list_path.empty()) {
    state_->stamp = StampOf(state_->options.allow_list_path);
    state_->client_stamp = StampOf(state_->options.client_allow_list_path);
    state_->builder_stamp = StampOf(state_->options.builder_allow_list_path);
  }
}

Result<std::unique_ptr<ZapAuthenticator>> ZapAuthenticator::FromFile(
    zmq::context_t& ctx, const std::string& allow_list_path, ZapAuthenticatorOptions options) {
  options.allow_list_path = allow_list_path;
  auto zap = std::make_unique<ZapAuthenticator>(ctx, std::vector<AllowedKey>{}, std::move(options));
  TUNE_RETURN_IF_ERROR(zap->state_->LoadStrict());
  return zap;
}

ZapAuthenticator::~ZapAuthenticator() { Stop(); }

Status ZapAuthenticator::Start() {
  std::lock_guard lock(state_->lifecycle_mu);
  if (state_->thread.joinable()) return Status::Error("zap: already started");
  try {
    zmq::socket_t sock(state_->ctx, zmq::socket_type::rep);
    sock.set(zmq::sockopt::linger, 0);
    // A handler stopped a moment ago releases the endpoint asynchronously
    // (libzmq's reaper thread), so a restart may briefly find it taken.
    for (int attempt = 0;; ++attempt) {
      try {
        sock.bind(kZapEndpoint);
        break;
      } catch (const zmq::error_t& e) {
        if (e.num() != EADDRINUSE || attempt >= kBindAttempts) throw;
        std::this_thread::sleep_for(kBindRetryInterval);
      }
    }
    state_->stop = false;
    // The socket moves to the handler thread; thread creation is the full
    // memory barrier libzmq asks for when a socket changes threads.
    state_->thread = std::thread([s = state_.get(), sk = std::move(sock)]() mutable {
      s->Run(std::move(sk));
    });
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) {
      return Status::Error("zap: another ZAP handler is already bound in this context");
    }
    return Status::Error(std::string("zap: cannot start: ") + e.what());
  }
  return Status::OK();
}

void ZapAuthenticator::Stop() {
  std::lock_guard lock(state_->lifecycle_mu);
  if (!state_->thread.joinable()) return;
  state_->stop = true;
  state_->thread.join();
}

Status ZapAuthenticator::Reload() { return state_->Reread(); }

std::optional<PeerRole> ZapAuthenticator::RoleOf(const std::string& key) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->allowed.find(key);
  if (it == state_->allowed.end()) return std::nullopt;
  return it->second.role;
}

size_t ZapAuthenticator::allowed_count() const {
  std::lock_guard lock(state_->mu);
  return state_->allowed.size();
}

uint64_t ZapAuthenticator::accepted() const { return state_->accepted.load(); }
uint64_t ZapAuthenticator::refused() const { return state_->refused.load(); }

std::string AdmittedKey(const zmq::message_t& msg) {
  // zmq_msg_gets() takes a non-const message although it only reads it.
  const char* v = zmq_msg_gets(const_cast<zmq_msg_t*>(msg.handle()), "User-Id");
  return v ? std::string(v) : std::string();
}

}  // namespace tune
