#include "measure/runner/runner_client.h"

#include <cstdio>

namespace tune::runner {
namespace {

using Outcome = RunnerProcess::ReadOutcome;

std::string SecondsText(double s) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.3g s", s);
  return buf;
}

}  // namespace

Status RunnerClient::Spawn() {
  runner_ = std::make_unique<RunnerProcess>(opts_.exe, opts_.args);
  runner_->set_exit_wait_seconds(opts_.exit_wait_seconds);
  ready_ = false;
  packages_sent_.clear();
  image_sent_.clear();
  default_images_sent_.clear();
  TUNE_RETURN_IF_ERROR(runner_->Start());
  ++stats_.spawns;
  WireWriter init(MsgType::kInit);
  init.U32(kRunnerProtocolVersion);
  init.Str(opts_.cache_dir);
  init.U32(static_cast<uint32_t>(opts_.include_roots.size()));
  for (const auto& [name, path] : opts_.include_roots) {
    init.Str(name);
    init.Str(path);
  }
  if (Status s = runner_->Send(init.bytes()); !s.ok()) {
    // Typically a runner that could not even be exec'ed: its exit status says why.
    std::string how = runner_->Reap();
    runner_.reset();
    return Status::Error(Named("ended at start-up (" + s.message() + "; " + how + ")"));
  }
  return Status::OK();
}

Status RunnerClient::EnsureReady() {
  if (!runner_ || !runner_->started()) TUNE_RETURN_IF_ERROR(Spawn());
  if (ready_) return Status::OK();
  std::string frame, why;
  const Outcome outcome = runner_->Read(opts_.startup_timeout_seconds, &frame, &why);
  if (outcome == Outcome::kTimeout) {
    std::string how = runner_->Kill();
    runner_.reset();
    return Status::Error(Named("did not start within " + std::to_string(opts_.startup_timeout_seconds) + " s; " + how));
  }
  if (outcome == Outcome::kClosed) {
    std::string how = runner_->Reap();
    runner_.reset();
    return Status::Error(Named("ended before its hello (" + why + "; " + how + ")"));
  }
  WireReader r(frame);
  uint32_t version = 0;
  bool ok = false;
  std::string error;
  if (r.Type() == MsgType::kHello) {
    version = r.U32();
    ok = r.U8() != 0;
    error = r.Str();
    DeviceInfo seen = DecodeDeviceInfo(&r);
    if (ok && r.ok() && !opts_.device_name.empty() && seen.name != opts_.device_name) {
      error = "it sees '" + seen.name + "', expected '" + opts_.device_name +
              "' (a different device order in its environment?)";
      ok = false;
    }
  } else {
    error = "its first message is not a hello";
  }
  if (!ok || !r.ok() || version != kRunnerProtocolVersion) {
    if (error.empty()) error = "it speaks protocol " + std::to_string(version);
    runner_->Kill();
    runner_.reset();
    return Status::Error(Named("could not start: " + error));
  }
  ready_ = true;
  return Status::OK();
}

void RunnerClient::Replace(bool killed) {
  ++(killed ? stats_.timeouts : stats_.crashes);
  runner_.reset();
  ready_ = false;
  // A failed spawn is retried by the next Measure.
  if (!Spawn().ok()) runner_.reset();
}

RunnerStats RunnerClient::stats() const {
  RunnerStats s = stats_;
  s.pid = runner_ && runner_->started() ? int(runner_->pid()) : 0;
  return s;
}

Measurement RunnerClient::Measure(const OpSpec& spec, MeasureRequest req, RunnerImages images, bool fresh,
                                  Measurement m) {
  if (fresh && runner_) {
    // The old runner exits on the closed channel and is gone (its context
    // with it) before the next one starts.
    runner_.reset();
    ready_ = false;
  }
  if (Status s = EnsureReady(); !s.ok()) {
    ++stats_.crashes;
    return Failed(std::move(m), FailureClass::kCrash, s.message());
  }
  auto runner_died = [&](const std::string& when, const std::string& why) {
    std::string how = runner_->Reap();
    Replace(false);
    return Failed(std::move(m), FailureClass::kCrash, Named("died " + when + ": " + why + "; " + how));
  };
  auto killed = [&](const std::string& why) {
    std::string how = runner_->Kill();
    Replace(false);
    return Failed(std::move(m), FailureClass::kCrash, Named(why + "; killed (" + how + ")"));
  };

  req.package_digest = PackageDigest(spec.package);
  if (!packages_sent_.count(req.package_digest)) {
    WireWriter w(MsgType::kPackage);
    EncodePackage(req.package_digest, spec.origin, spec.package, &w);
    if (Status s = runner_->Send(w.bytes()); !s.ok()) return runner_died("while receiving the op", s.message());
    packages_sent_.insert(req.package_digest);
  }
  // A config timed again straight after (the shapes of a unit that has
  // several): its image travels once.
  if (images.image && req.image_key != image_sent_) req.image = *images.image;
  if (images.default_image && !default_images_sent_.count(req.default_image_key))
    req.default_image = *images.default_image;
  WireWriter w(MsgType::kMeasure);
  EncodeMeasureRequest(req, &w);
  image_sent_.clear();
  if (Status s = runner_->Send(w.bytes()); !s.ok()) return runner_died("while receiving the request", s.message());
  image_sent_ = req.image_key;
  if (!req.default_image_key.empty()) default_images_sent_.insert(req.default_image_key);

  // Two clocks: building a problem (inputs, reference) is shared by every
  // config of the shape and may be slow; the config's own limit starts when
  // the runner says the problem is ready.
  bool started = false;
  for (;;) {
    const double limit = started ? req.policy.timeout_seconds : opts_.startup_timeout_seconds;
    std::string frame, why;
    const Outcome outcome = runner_->Read(limit, &frame, &why);
    if (outcome == Outcome::kTimeout) {
      std::string how = runner_->Kill();
      Replace(true);
      return Failed(std::move(m), FailureClass::kTimeout,
                  (started ? "config ran longer than " : "preparing inputs and reference took longer than ") +
                      SecondsText(limit) + "; runner killed (" + how + ")");
    }
    if (outcome == Outcome::kClosed)
      return runner_died(started ? "while running the config" : "while preparing inputs and reference", why);
    WireReader r(frame);
    const MsgType type = r.Type();
    if (type == MsgType::kStarted) {
      started = true;
      continue;
    }
    if (type != MsgType::kResult) return killed("sent an unexpected message");
    Measurement got = DecodeMeasurement(&r);
    const bool fatal = r.U8() != 0;
    if (!r.ok()) return killed("sent a truncated result");
    m.CopyOutcome(got);
    if (!got.baseline.empty()) m.baseline = got.baseline;  // with the library's version
    if (fatal) {
      // The runner exits by itself after a sticky error.
      std::string how = runner_->Reap();
      Replace(false);
      m.failure_message += " [runner " + how + "; restarted]";
    }
    return m;
  }
}

}  // namespace tune::runner
