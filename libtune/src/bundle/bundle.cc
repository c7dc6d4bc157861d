// Bundles: the Cap'n Proto form, files and the signed envelope (the JSON
// form is in bundle_json.cc).
#include "bundle/bundle.h"


#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <set>
#include <string_view>
#include <tuple>

#include "base/env.h"
#include "codec/codec.h"
#include "schema/bundle.capnp.h"
#include "bundle/bundle_checks.h"
#include "base/limits.h"
#include "base/text.h"

namespace tune {

using namespace codec;  // NOLINT: this file is the bundle codec

namespace {

// Bundles are read by deployments from files that may be damaged or
// replaced; this bounds what a bad file can make us allocate.
constexpr size_t kMaxBundleBytes = 256u << 20;
// A bundle's text is read as the farm wrote it (not held to the UTF-8 check
// of what peers send); a bundle nests about 7 deep (LaunchPlan > args >
// value > code), so its bound is tighter than an envelope's.
constexpr FrameRules kBundleFrame{"bundle is corrupt", kMaxBundleBytes, false, 16};

void SetProgram(wire::LaunchProgram::Builder w, const LaunchProgram& p) {
  w.setCode(capnp::Data::Reader(p.code.data(), p.code.size()));
  auto ops = w.initOperands(static_cast<unsigned>(p.operands.size()));
  for (size_t i = 0; i < p.operands.size(); ++i) ops.set(static_cast<unsigned>(i), p.operands[i]);
  w.setText(TextOf(p.text));
}

LaunchProgram GetProgram(wire::LaunchProgram::Reader r, Budget& budget) {
  LaunchProgram p;
  auto code = r.getCode();
  auto ops = r.getOperands();
  budget.Charge(code.size() + ops.size(), sizeof(double));
  p.code.assign(code.begin(), code.end());
  p.operands.reserve(ops.size());
  for (double v : ops) p.operands.push_back(v);
  p.text = Str(r.getText());
  return p;
}

// A deployment may read the bundle while a rollout rewrites it: it must
// see either the old file or the new one, never a torn one.
Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  return Env::Default()->WriteFileAtomically(path, bytes);
}

// The signed envelope; the layout is documented in bundle.h.
constexpr char kEnvelopeMagic[8] = {'T', 'F', 'B', 'U', 'N', 'D', 'L', 'E'};
constexpr uint32_t kEnvelopeVersion = 1;
constexpr uint32_t kAlgorithmEd25519 = 1;
constexpr size_t kEnvelopeHeaderBytes = 32;
constexpr size_t kMaxEnvelopeBytes = kEnvelopeHeaderBytes + kMaxBundleBytes + kSignatureBytes;

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool HasEnvelopeMagic(const void* data, size_t size) {
  return size >= sizeof kEnvelopeMagic && std::memcmp(data, kEnvelopeMagic, sizeof kEnvelopeMagic) == 0;
}

struct Envelope {
  std::string_view signed_part;  // header + payload: what the signature covers
  const unsigned char* payload = nullptr;
  size_t payload_size = 0;
  std::array<uint8_t, kKeyIdBytes> key_id{};
  Signature signature{};
};

std::string HexId(const std::array<uint8_t, kKeyIdBytes>& id) { return HexOf(id.data(), id.size()); }

// Structure only: the caller decides whether to check the signature.
Status ParseEnvelope(const void* data, size_t size, Envelope* env) {
  if (!HasEnvelopeMagic(data, size)) {
    return Status::Error(
        "not signed (no \"TFBUNDLE\" signature envelope): publish it again without --unsigned; `tunefarm "
        "publish` and `tunefarm tune` sign with --sign-key KEY or by default with ~/.config/tunefarm/bundle.key");
  }
  const auto* p = static_cast<const unsigned char*>(data);
  if (size < kEnvelopeHeaderBytes + kSignatureBytes) return Status::Error("signed bundle is truncated");
  const uint32_t version = static_cast<uint32_t>(GetLe(p + 8, 4));
  if (version != kEnvelopeVersion) {
    return Status::Error("signature envelope version " + std::to_string(version) +
                         " is not one this libtune reads (" + std::to_string(kEnvelopeVersion) + ")");
  }
  const uint32_t algorithm = static_cast<uint32_t>(GetLe(p + 12, 4));
  if (algorithm != kAlgorithmEd25519) {
    return Status::Error("unknown signature algorithm " + std::to_string(algorithm));
  }
  const uint64_t n = GetLe(p + 16, 8);
  if (n > kMaxBundleBytes || kEnvelopeHeaderBytes + n + kSignatureBytes != size) {
    return Status::Error("signed bundle is truncated or corrupt (payload size " + std::to_string(n) +
                         " does not match the file size " + std::to_string(size) + ")");
  }
  env->signed_part = std::string_view(reinterpret_cast<const char*>(p), kEnvelopeHeaderBytes + n);
  env->payload = p + kEnvelopeHeaderBytes;
  env->payload_size = n;
  std::memcpy(env->key_id.data(), p + 24, kKeyIdBytes);
  std::memcpy(env->signature.data(), p + kEnvelopeHeaderBytes + n, kSignatureBytes);
  return Status::OK();
}

// A bundle no deployment would read is refused when written, not shipped.
Status CheckReadableSize(size_t payload_bytes, const std::string& path_without_ext) {
  if (payload_bytes <= kMaxBundleBytes) return Status::OK();
  return Status::InvalidArgument("bundle " + path_without_ext + ".tfb: " + std::to_string(payload_bytes) +
                                 " bytes exceeds the " + std::to_string(kMaxBundleBytes) +
                                 " that deployments read; publish fewer keys (--op, --gpu, --dtype) or --no-kernels");
}

Status ReadFileBytes(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::Error("cannot open: " + std::string(std::strerror(errno)));
  const std::streamoff size = in.tellg();
  if (size < 0) return Status::Error("cannot read its size");
  if (static_cast<uint64_t>(size) > kMaxEnvelopeBytes) {
    return Status::Error(std::to_string(size) + " bytes exceeds the limit of " +
                         std::to_string(kMaxEnvelopeBytes));
  }
  in.seekg(0);
  out->assign(static_cast<size_t>(size), '\0');
  if (!in.read(out->data(), size)) return Status::Error("read failed");
  return Status::OK();
}

}  // namespace

Status CheckVersion(uint32_t v) {
  if (v == 0) return Status::Error("bundle has no format version");
  if (v > kBundleFormatVersion) {
    return Status::Error("bundle format version " + std::to_string(v) +
                         " is newer than this libtune reads (" +
                         std::to_string(kBundleFormatVersion) + ")");
  }
  return Status::OK();
}

Status CheckBundleBounds(const Bundle& b) {
  auto config = [](const std::string& what, const Config& c) -> Status {
    if (c.params.size() <= kMaxOpParams) return Status::OK();
    return Status::Error(what + ": a config of " + std::to_string(c.params.size()) + " params, more than the limit of " +
                         std::to_string(kMaxOpParams) + " params per config");
  };
  // A plan's or rules' variables: the op's params, its dims, then dsize.
  constexpr size_t kMaxVars = kMaxOpParams + kMaxOpDims + 1;
  auto vars = [&](const std::string& what, size_t n) -> Status {
    if (n <= kMaxVars) return Status::OK();
    return Status::Error(what + ": " + std::to_string(n) + " variables, more than the limit of " +
                         std::to_string(kMaxVars) + " (params, dims and dsize)");
  };
  for (const auto& [op, c] : b.defaults) TUNE_RETURN_IF_ERROR(config("default of " + op, c));
  // Dims per shape: the runtime's own bound (runtime.h kMaxDims) refuses them at load.
  for (const BundleEntry& e : b.entries)
    TUNE_RETURN_IF_ERROR(config("entry " + e.op + " " + e.dtype + " " + e.gpu_model, e.config));
  for (const ModelDefault& d : b.model_defaults)
    TUNE_RETURN_IF_ERROR(config("model default " + d.op + " " + d.dtype + " " + d.gpu_model, d.config));
  for (const ArchDefault& d : b.arch_defaults) TUNE_RETURN_IF_ERROR(config("arch default " + d.op + " " + d.arch, d.config));
  for (const BundleLaunchPlan& plan : b.launch_plans)
    TUNE_RETURN_IF_ERROR(vars("launch plan " + plan.op + "@" + plan.kernel_hash, plan.vars.size()));
  for (const auto& [op, r] : b.shape_rules) TUNE_RETURN_IF_ERROR(vars("shape rules of " + op, r.vars.size()));
  for (const BundleSelector& s : b.selectors) {
    if (s.dims.empty() || s.dims.size() > kMaxSelectorDims || s.entries.empty() ||
        s.entries.size() > kMaxSelectorCandidates || s.nodes.size() > kMaxSelectorNodes)
      return Status::Error("selector " + s.op + " " + s.dtype + " " + s.gpu_model + ": " + std::to_string(s.dims.size()) +
                           " dims, " + std::to_string(s.entries.size()) + " entries, " + std::to_string(s.nodes.size()) +
                           " nodes (1-" + std::to_string(kMaxSelectorDims) + ", 1-" +
                           std::to_string(kMaxSelectorCandidates) + ", 1-" + std::to_string(kMaxSelectorNodes) + ")");
  }
  return Status::OK();
}

uint32_t FormatVersionOf(const Bundle& b) {
  uint32_t v = b.format_version;
  for (const BundleLaunchPlan& plan : b.launch_plans)
    for (const BundleLaunchArg& a : plan.args)
      if (a.tensor_map()) v = std::max(v, 2u);
  return v;
}

Status CheckBundleParts(const Bundle& b) {
  for (const BundleLaunchPlan& plan : b.launch_plans) {
    const std::string where = "launch plan " + plan.op + "@" + plan.kernel_hash + ": ";
    std::vector<const LaunchProgram*> programs = {&plan.smem};
    for (int i = 0; i < 3; ++i) programs.insert(programs.end(), {&plan.grid[i], &plan.block[i]});
    for (const BundleLaunchArg& a : plan.args) {
      if (a.tensor_map()) {
        // A map describes a buffer of the plan, one extent and box dim per
        // dim of it, 1 to 5 of them.
        const std::string map = where + "tensor map " + a.name + ": ";
        if (a.buffer || a.scalar_type != kTensorMapArg) return Status::Error(map + "buffer or scalar_type says otherwise");
        if (size_t(a.map_of) >= plan.args.size() || !plan.args[a.map_of].buffer)
          return Status::Error(map + "map_of " + std::to_string(a.map_of) + " is not a buffer of the plan");
        if (a.extents.empty() || a.extents.size() > 5 || a.box.size() != a.extents.size())
          return Status::Error(map + std::to_string(a.extents.size()) + " extents and " + std::to_string(a.box.size()) +
                               " box dims (1 to 5 each, as many)");
        if (a.swizzle != 0 && a.swizzle != 32 && a.swizzle != 64 && a.swizzle != 128)
          return Status::Error(map + "swizzle " + std::to_string(a.swizzle) + " is not 0, 32, 64 or 128");
        for (const auto* list : {&a.extents, &a.box})
          for (const LaunchProgram& p : *list) programs.push_back(&p);
      } else if (a.scalar_type == kTensorMapArg) {
        return Status::Error(where + "tensor map " + a.name + " describes no buffer");
      } else if (!a.buffer) {
        programs.push_back(&a.value);
      }
    }
    for (const LaunchProgram* p : programs) TUNE_RETURN_IF_ERROR(CheckLaunchProgram(*p, plan.vars.size()).WithPrefix(where));
  }
  for (const KernelImage& k : b.kernels) TUNE_RETURN_IF_ERROR(CheckKernelImage(k));
  for (const auto& [op, r] : b.shape_rules) {
    // params, dims, then dsize: at least dsize, and params within.
    if (r.vars.empty() || r.vars.back() != "dsize" || r.params >= r.vars.size())
      return Status::Error("shape rules of " + op + ": variables are not params, dims and dsize");
    for (const LaunchProgram& p : r.rules)
      TUNE_RETURN_IF_ERROR(CheckLaunchProgram(p, r.vars.size()).WithPrefix("shape rules of " + op + ": "));
  }
  for (const auto& [op, dims] : b.buckets) {
    for (const auto& [dim, bucket] : dims) {
      if (Status st = bucket.Check(); !st.ok()) return Status::Error("bucket of " + op + " " + dim + ": " + st.message());
    }
  }
  std::set<std::tuple<std::string, std::string, std::string>> selected;
  for (const BundleSelector& s : b.selectors) {
    const std::string where = "selector " + s.op + " " + s.dtype + " " + s.gpu_model + ": ";
    if (!selected.emplace(s.op, s.dtype, s.gpu_model).second) return Status::Error(where + "a second one");
    for (uint32_t i : s.entries) {
      if (i >= b.entries.size()) return Status::Error(where + "entry " + std::to_string(i) + " of " +
                                                      std::to_string(b.entries.size()));
      const BundleEntry& e = b.entries[i];
      if (e.op != s.op || e.dtype != s.dtype || e.gpu_model != s.gpu_model)
        return Status::Error(where + "entry " + std::to_string(i) + " is of another key");
    }
    TUNE_RETURN_IF_ERROR(
        CheckSelectorNodes(s.nodes, SelectorFeatureCount(s.dims.size()), s.entries.size()).WithPrefix(where));
  }
  return Status::OK();
}

namespace {

// EncodeBundle's parts, one list each, in the order of the message: the
// order in which lists are initialised is the order of their bytes, and a
// bundle's bytes (and so its signature) must not depend on the code.

void SetEntry(wire::BundleEntry::Builder w, const BundleEntry& e) {
  w.setOp(TextOf(e.op));
  w.setDtype(TextOf(e.dtype));
  w.setGpuModel(TextOf(e.gpu_model));
  SetShape(w.initShape(), e.shape);
  SetConfig(w.initConfig(), e.config);
  w.setConfigId(TextOf(e.config_id));
  w.setKernelHash(TextOf(e.kernel_hash));
  w.setMedianUs(e.median_us);
  w.setStdevUs(e.stdev_us);
  w.setCi95Us(e.ci95_us);
  w.setSamples(e.samples);
  w.setDefaultMedianUs(e.default_median_us);
  w.setBaseline(TextOf(e.baseline));
  w.setBaselineMedianUs(e.baseline_median_us);
  w.setBackend(TextOf(e.backend));
  w.setDeviceName(TextOf(e.device_name));
  w.setNvrtcVersion(TextOf(e.nvrtc_version));
  w.setDriverVersion(TextOf(e.driver_version));
  w.setArch(TextOf(e.arch));
  w.setCoverageState(TextOf(e.coverage.state));
  w.setCoverageLegal(e.coverage.legal);
  w.setCoverageEvaluated(e.coverage.evaluated);
  w.setCoverageStrategy(TextOf(e.coverage.strategy));
  w.setCoverageBudget(e.coverage.budget);
  w.setCheckedAgainst(TextOf(e.checked_against));
  w.setEnergyUj(e.energy_uj);
  w.setPowerW(e.power_w);
  w.setPowerLimitW(e.power_limit_w);
  w.setObjective(TextOf(e.objective));
}

void SetLaunchArg(wire::LaunchArg::Builder wa, const BundleLaunchArg& arg) {
  wa.setName(TextOf(arg.name));
  wa.setBuffer(arg.buffer);
  wa.setDtype(TextOf(arg.dtype));
  wa.setDir(TextOf(arg.dir));
  wa.setScalarType(TextOf(arg.scalar_type));
  if (arg.tensor_map()) {
    wa.setMapOf(arg.map_of);
    wa.setSwizzle(static_cast<uint16_t>(arg.swizzle));
    auto extents = wa.initExtents(static_cast<unsigned>(arg.extents.size()));
    auto box = wa.initBox(static_cast<unsigned>(arg.box.size()));
    for (unsigned d = 0; d < arg.extents.size(); ++d) SetProgram(extents[d], arg.extents[d]);
    for (unsigned d = 0; d < arg.box.size(); ++d) SetProgram(box[d], arg.box[d]);
  } else if (!arg.buffer) {
    SetProgram(wa.initValue(), arg.value);
  }
}

void SetLaunchPlan(wire::LaunchPlan::Builder w, const BundleLaunchPlan& p) {
  w.setOp(TextOf(p.op));
  w.setKernelHash(TextOf(p.kernel_hash));
  w.setFunction(TextOf(p.function));
  auto vars = w.initVars(static_cast<unsigned>(p.vars.size()));
  for (size_t v = 0; v < p.vars.size(); ++v) vars.set(static_cast<unsigned>(v), TextOf(p.vars[v]));
  auto grid = w.initGrid(3), block = w.initBlock(3);
  for (unsigned d = 0; d < 3; ++d) {
    SetProgram(grid[d], p.grid[d]);
    SetProgram(block[d], p.block[d]);
  }
  SetProgram(w.initSmem(), p.smem);
  auto args = w.initArgs(static_cast<unsigned>(p.args.size()));
  for (size_t a = 0; a < p.args.size(); ++a) SetLaunchArg(args[static_cast<unsigned>(a)], p.args[a]);
}

void SetModelDefault(wire::ModelDefault::Builder w, const ModelDefault& d) {
  w.setOp(TextOf(d.op));
  w.setDtype(TextOf(d.dtype));
  w.setGpuModel(TextOf(d.gpu_model));
  SetConfig(w.initConfig(), d.config);
  w.setConfigId(TextOf(d.config_id));
  w.setKernelHash(TextOf(d.kernel_hash));
  w.setArch(TextOf(d.arch));
  w.setMedianUs(d.median_us);
}

// Every (op, dim) bucket, ops then dims in their maps' order.
void SetBuckets(wire::Bundle::Builder root, const Bundle& b) {
  size_t n_buckets = 0;
  for (const auto& [op, dims] : b.buckets) n_buckets += dims.size();
  auto buckets = root.initBuckets(static_cast<unsigned>(n_buckets));
  size_t i = 0;
  for (const auto& [op, dims] : b.buckets) {
    for (const auto& [dim, bucket] : dims) {
      auto w = buckets[static_cast<unsigned>(i++)];
      w.setOp(TextOf(op));
      w.setDim(TextOf(dim));
      w.setKind(bucket.kind == DimBucket::Kind::kPow2   ? wire::BucketKind::POW2
                : bucket.kind == DimBucket::Kind::kList ? wire::BucketKind::LIST
                                                        : wire::BucketKind::EXACT);
      auto values = w.initValues(static_cast<unsigned>(bucket.values.size()));
      for (size_t v = 0; v < bucket.values.size(); ++v) values.set(static_cast<unsigned>(v), bucket.values[v]);
    }
  }
}

void SetShapeRules(wire::ShapeRules::Builder w, const std::string& op, const BundleShapeRules& r) {
  w.setOp(TextOf(op));
  auto vars = w.initVars(static_cast<unsigned>(r.vars.size()));
  for (size_t v = 0; v < r.vars.size(); ++v) vars.set(static_cast<unsigned>(v), TextOf(r.vars[v]));
  w.setParams(static_cast<uint32_t>(r.params));
  auto programs = w.initRules(static_cast<unsigned>(r.rules.size()));
  for (size_t p = 0; p < r.rules.size(); ++p) SetProgram(programs[static_cast<unsigned>(p)], r.rules[p]);
}

void SetSelector(wire::ShapeSelector::Builder w, const BundleSelector& s) {
  w.setOp(TextOf(s.op));
  w.setDtype(TextOf(s.dtype));
  w.setGpuModel(TextOf(s.gpu_model));
  auto dims = w.initDims(static_cast<unsigned>(s.dims.size()));
  for (size_t d = 0; d < s.dims.size(); ++d) dims.set(static_cast<unsigned>(d), TextOf(s.dims[d]));
  auto entries = w.initEntries(static_cast<unsigned>(s.entries.size()));
  for (size_t e = 0; e < s.entries.size(); ++e) entries.set(static_cast<unsigned>(e), s.entries[e]);
  auto nodes = w.initNodes(static_cast<unsigned>(s.nodes.size()));
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    auto node = nodes[static_cast<unsigned>(n)];
    const SelectorNode& from = s.nodes[n];
    node.setLeaf(from.leaf);
    node.setFeature(from.feature);
    node.setThreshold(from.threshold);
    node.setLeft(from.left);
    node.setRight(from.right);
    node.setCandidate(from.candidate);
  }
}

}  // namespace

std::string EncodeBundle(const Bundle& b) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<wire::Bundle>();
  root.setFormatVersion(FormatVersionOf(b));
  root.setName(TextOf(b.name));
  root.setFarmVersion(TextOf(b.farm_version));
  root.setCreatedUnix(b.created_unix);
  auto defaults = root.initDefaults(b.defaults.size());
  size_t i = 0;
  for (const auto& [op, config] : b.defaults) {
    defaults[i].setOp(TextOf(op));
    SetConfig(defaults[i].initConfig(), config);
    ++i;
  }
  auto entries = root.initEntries(b.entries.size());
  for (i = 0; i < b.entries.size(); ++i) SetEntry(entries[i], b.entries[i]);
  auto plans = root.initLaunchPlans(static_cast<unsigned>(b.launch_plans.size()));
  for (i = 0; i < b.launch_plans.size(); ++i) SetLaunchPlan(plans[i], b.launch_plans[i]);
  auto kernels = root.initKernels(static_cast<unsigned>(b.kernels.size()));
  for (i = 0; i < b.kernels.size(); ++i) SetKernelImage(kernels[i], b.kernels[i], /*with_witnesses=*/false);
  auto model_defaults = root.initModelDefaults(static_cast<unsigned>(b.model_defaults.size()));
  for (i = 0; i < b.model_defaults.size(); ++i) SetModelDefault(model_defaults[i], b.model_defaults[i]);
  auto arch_defaults = root.initArchDefaults(static_cast<unsigned>(b.arch_defaults.size()));
  for (i = 0; i < b.arch_defaults.size(); ++i) {
    const ArchDefault& d = b.arch_defaults[i];
    arch_defaults[i].setOp(TextOf(d.op));
    arch_defaults[i].setArch(TextOf(d.arch));
    SetConfig(arch_defaults[i].initConfig(), d.config);
  }
  SetBuckets(root, b);
  auto rules = root.initShapeRules(static_cast<unsigned>(b.shape_rules.size()));
  i = 0;
  for (const auto& [op, r] : b.shape_rules) SetShapeRules(rules[static_cast<unsigned>(i++)], op, r);
  auto selectors = root.initSelectors(static_cast<unsigned>(b.selectors.size()));
  for (size_t k = 0; k < b.selectors.size(); ++k) SetSelector(selectors[static_cast<unsigned>(k)], b.selectors[k]);
  return ToBytes(builder);
}

namespace {

// DecodeBundle's parts, one list element each, charging `budget` for what
// they copy in the order DecodeBundle reads it.

BundleEntry GetEntry(wire::BundleEntry::Reader r, Budget& budget) {
  BundleEntry e;
  e.op = Str(r.getOp());
  e.dtype = Str(r.getDtype());
  e.gpu_model = Str(r.getGpuModel());
  e.shape = GetShape(r.getShape(), budget);
  e.config = GetConfig(r.getConfig(), budget);
  e.config_id = Str(r.getConfigId());
  e.kernel_hash = Str(r.getKernelHash());
  e.median_us = r.getMedianUs();
  e.stdev_us = r.getStdevUs();
  e.ci95_us = r.getCi95Us();
  e.samples = r.getSamples();
  e.default_median_us = r.getDefaultMedianUs();
  e.baseline = Str(r.getBaseline());
  e.baseline_median_us = r.getBaselineMedianUs();
  e.backend = Str(r.getBackend());
  e.device_name = Str(r.getDeviceName());
  e.nvrtc_version = Str(r.getNvrtcVersion());
  e.driver_version = Str(r.getDriverVersion());
  e.arch = Str(r.getArch());
  e.coverage.state = Str(r.getCoverageState());
  e.coverage.legal = r.getCoverageLegal();
  e.coverage.evaluated = r.getCoverageEvaluated();
  e.coverage.strategy = Str(r.getCoverageStrategy());
  e.coverage.budget = r.getCoverageBudget();
  e.checked_against = Str(r.getCheckedAgainst());
  e.energy_uj = r.getEnergyUj();
  e.power_w = r.getPowerW();
  e.power_limit_w = r.getPowerLimitW();
  e.objective = Str(r.getObjective());
  return e;
}

Result<BundleLaunchPlan> GetLaunchPlan(wire::LaunchPlan::Reader r, Budget& budget) {
  BundleLaunchPlan p;
  p.op = Str(r.getOp());
  p.kernel_hash = Str(r.getKernelHash());
  p.function = Str(r.getFunction());
  auto vars = r.getVars();
  budget.Charge(vars.size(), sizeof(std::string));
  for (auto v : vars) p.vars.push_back(Str(v));
  auto grid = r.getGrid(), block = r.getBlock();
  if (grid.size() != 3 || block.size() != 3)
    return Status::Error("bundle is corrupt: launch plan " + p.op + " lacks a grid or block dimension");
  for (unsigned d = 0; d < 3; ++d) {
    p.grid[d] = GetProgram(grid[d], budget);
    p.block[d] = GetProgram(block[d], budget);
  }
  p.smem = GetProgram(r.getSmem(), budget);
  auto args = r.getArgs();
  budget.Charge(args.size(), sizeof(BundleLaunchArg));
  for (auto ra : args) {
    BundleLaunchArg a;
    a.name = Str(ra.getName());
    a.buffer = ra.getBuffer();
    a.dtype = Str(ra.getDtype());
    a.dir = Str(ra.getDir());
    a.scalar_type = Str(ra.getScalarType());
    a.map_of = ra.getMapOf();
    if (a.tensor_map()) {
      a.swizzle = ra.getSwizzle();
      budget.Charge(ra.getExtents().size() + ra.getBox().size(), sizeof(LaunchProgram));
      for (auto e : ra.getExtents()) a.extents.push_back(GetProgram(e, budget));
      for (auto e : ra.getBox()) a.box.push_back(GetProgram(e, budget));
    } else if (!a.buffer) {
      a.value = GetProgram(ra.getValue(), budget);
    }
    p.args.push_back(std::move(a));
  }
  return p;
}

ModelDefault GetModelDefault(wire::ModelDefault::Reader r, Budget& budget) {
  ModelDefault d;
  d.op = Str(r.getOp());
  d.dtype = Str(r.getDtype());
  d.gpu_model = Str(r.getGpuModel());
  d.config = GetConfig(r.getConfig(), budget);
  d.config_id = Str(r.getConfigId());
  d.kernel_hash = Str(r.getKernelHash());
  d.arch = Str(r.getArch());
  d.median_us = r.getMedianUs();
  return d;
}

Result<DimBucket> GetBucket(wire::DimBucket::Reader r, Budget& budget) {
  DimBucket d;
  switch (r.getKind()) {
    case wire::BucketKind::EXACT: d.kind = DimBucket::Kind::kExact; break;
    case wire::BucketKind::POW2: d.kind = DimBucket::Kind::kPow2; break;
    case wire::BucketKind::LIST: d.kind = DimBucket::Kind::kList; break;
    default: return Status::Error("bundle is corrupt: a bucket of an unknown kind");
  }
  auto values = r.getValues();
  budget.Charge(values.size(), sizeof(int64_t));
  for (int64_t v : values) d.values.push_back(v);
  return d;
}

BundleShapeRules GetShapeRules(wire::ShapeRules::Reader r, Budget& budget) {
  BundleShapeRules rules;
  auto vars = r.getVars();
  budget.Charge(vars.size(), sizeof(std::string));
  for (auto v : vars) rules.vars.push_back(Str(v));
  rules.params = r.getParams();
  for (auto p : r.getRules()) rules.rules.push_back(GetProgram(p, budget));
  return rules;
}

BundleSelector GetSelector(wire::ShapeSelector::Reader r, Budget& budget) {
  BundleSelector s{Str(r.getOp()), Str(r.getDtype()), Str(r.getGpuModel()), {}, {}, {}};
  auto dims = r.getDims();
  auto entries = r.getEntries();
  auto nodes = r.getNodes();
  budget.Charge(dims.size(), sizeof(std::string));
  budget.Charge(entries.size(), sizeof(uint32_t));
  budget.Charge(nodes.size(), sizeof(SelectorNode));
  for (auto d : dims) s.dims.push_back(Str(d));
  for (uint32_t e : entries) s.entries.push_back(e);
  for (auto n : nodes)
    s.nodes.push_back(SelectorNode{n.getLeaf(), n.getFeature(), n.getThreshold(), n.getLeft(), n.getRight(),
                                   n.getCandidate()});
  return s;
}

}  // namespace

Result<Bundle> DecodeBundle(const void* data, size_t size) {
  if (size == 0 || data == nullptr) return Status::Error("bundle is empty");
  if (size > kMaxBundleBytes) {
    return Status::Error("bundle of " + std::to_string(size) + " bytes exceeds the limit of " +
                         std::to_string(kMaxBundleBytes));
  }
  return ReadFrame<Bundle>(data, size, kBundleFrame, [](capnp::MessageReader& reader, Budget& budget) -> Result<Bundle> {
    auto root = reader.getRoot<wire::Bundle>();
    Bundle b;
    b.format_version = root.getFormatVersion();
    TUNE_RETURN_IF_ERROR(CheckVersion(b.format_version));
    b.name = Str(root.getName());
    b.farm_version = Str(root.getFarmVersion());
    b.created_unix = root.getCreatedUnix();
    auto defaults = root.getDefaults();
    auto entries = root.getEntries();
    budget.Charge(defaults.size(), sizeof(std::pair<const std::string, Config>) + 4 * sizeof(void*));
    budget.Charge(entries.size(), sizeof(BundleEntry));
    for (auto d : defaults) {
      b.defaults[Str(d.getOp())] = GetConfig(d.getConfig(), budget);
    }
    b.entries.reserve(entries.size());
    for (auto r : entries) b.entries.push_back(GetEntry(r, budget));
    auto plans = root.getLaunchPlans();
    auto kernels = root.getKernels();
    auto model_defaults = root.getModelDefaults();
    budget.Charge(plans.size(), sizeof(BundleLaunchPlan));
    budget.Charge(kernels.size(), sizeof(KernelImage));
    budget.Charge(model_defaults.size(), sizeof(ModelDefault));
    for (auto r : plans) {
      auto p = GetLaunchPlan(r, budget);
      if (!p.ok()) return p.status();
      b.launch_plans.push_back(std::move(p).value());
    }
    for (auto r : kernels) b.kernels.push_back(GetKernelImage(r, budget));
    for (auto r : model_defaults) b.model_defaults.push_back(GetModelDefault(r, budget));
    auto arch_defaults = root.getArchDefaults();
    budget.Charge(arch_defaults.size(), sizeof(ArchDefault));
    for (auto r : arch_defaults) {
      b.arch_defaults.push_back(
          ArchDefault{Str(r.getOp()), Str(r.getArch()), GetConfig(r.getConfig(), budget)});
    }
    auto buckets = root.getBuckets();
    budget.Charge(buckets.size(), sizeof(DimBucket));
    for (auto r : buckets) {
      auto d = GetBucket(r, budget);
      if (!d.ok()) return d.status();
      if (!b.buckets[Str(r.getOp())].emplace(Str(r.getDim()), std::move(d).value()).second)
        return Status::Error("bundle is corrupt: two buckets for " + Str(r.getOp()) + " " + Str(r.getDim()));
    }
    auto shape_rules = root.getShapeRules();
    budget.Charge(shape_rules.size(), sizeof(BundleShapeRules));
    for (auto r : shape_rules) {
      BundleShapeRules rules = GetShapeRules(r, budget);
      if (!b.shape_rules.emplace(Str(r.getOp()), std::move(rules)).second)
        return Status::Error("bundle is corrupt: two sets of shape rules for " + Str(r.getOp()));
    }
    auto selectors = root.getSelectors();
    budget.Charge(selectors.size(), sizeof(BundleSelector));
    for (auto r : selectors) b.selectors.push_back(GetSelector(r, budget));
    if (Status st = CheckBundleBounds(b); !st.ok()) return st.WithPrefix("bundle refused: ");
    if (Status st = CheckBundleParts(b); !st.ok()) return st.WithPrefix("bundle is corrupt: ");
    return b;
  });
}

Status WriteBundleFiles(const Bundle& b, const std::string& path_without_ext) {
  const std::string bytes = EncodeBundle(b);
  TUNE_RETURN_IF_ERROR(CheckReadableSize(bytes.size(), path_without_ext));
  TUNE_RETURN_IF_ERROR(WriteFileAtomically(path_without_ext + ".tfb", bytes));
  return WriteFileAtomically(path_without_ext + ".json", BundleToJson(b));
}

Result<Bundle> ReadBundleFile(const std::string& path, std::string* signer_key_id) {
  if (signer_key_id) signer_key_id->clear();
  std::string bytes;
  Status st = ReadFileBytes(path, &bytes);
  if (!st.ok()) return Status::Error("bundle " + path + ": " + st.message());
  const void* payload = bytes.data();
  size_t payload_size = bytes.size();
  if (HasEnvelopeMagic(bytes.data(), bytes.size())) {
    Envelope env;
    st = ParseEnvelope(bytes.data(), bytes.size(), &env);
    if (!st.ok()) return Status::Error("bundle " + path + ": " + st.message());
    if (signer_key_id) *signer_key_id = HexId(env.key_id);
    payload = env.payload;
    payload_size = env.payload_size;
  }
  Result<Bundle> b = DecodeBundle(payload, payload_size);
  if (!b.ok()) return Status::Error("bundle " + path + ": " + b.status().message());
  return b;
}

std::string EncodeSignedBundle(const Bundle& b, const SecretKey& key) {
  const std::string payload = EncodeBundle(b);
  std::string out;
  out.reserve(kEnvelopeHeaderBytes + payload.size() + kSignatureBytes);
  out.append(kEnvelopeMagic, sizeof kEnvelopeMagic);
  PutLe(&out, kEnvelopeVersion, 4);
  PutLe(&out, kAlgorithmEd25519, 4);
  PutLe(&out, payload.size(), 8);
  const auto id = key.public_key().IdBytes();
  out.append(reinterpret_cast<const char*>(id.data()), id.size());
  out += payload;
  const Signature sig = key.Sign(out);
  out.append(reinterpret_cast<const char*>(sig.data()), sig.size());
  return out;
}

Result<Bundle> DecodeVerifiedBundle(const void* data, size_t size, const std::vector<PublicKey>& trusted,
                                    PublicKey* signed_by) {
  if (size == 0 || data == nullptr) return Status::Error("bundle is empty");
  Envelope env;
  TUNE_RETURN_IF_ERROR(ParseEnvelope(data, size, &env));
  if (trusted.empty()) return Status::Error("no trusted public key to check its signature against");
  std::string trusted_ids;
  const PublicKey* signer = nullptr;
  bool claimed = false;
  for (const PublicKey& key : trusted) {
    if (key.IdBytes() != env.key_id) {
      if (!trusted_ids.empty()) trusted_ids += ", ";
      trusted_ids += key.Id();
      continue;
    }
    // Ids are short: a clash is possible, so every key with the id is tried.
    claimed = true;
    if (VerifySignature(key, env.signed_part, env.signature)) {
      signer = &key;
      break;
    }
  }
  if (!claimed) {
    return Status::Error("signed by key " + HexId(env.key_id) + ", which is not trusted (trusted: " +
                         trusted_ids + ")");
  }
  if (!signer) {
    return Status::Error("signature check failed: the file was changed after key " + HexId(env.key_id) +
                         " signed it");
  }
  Result<Bundle> b = DecodeBundle(env.payload, env.payload_size);
  if (b.ok() && signed_by) *signed_by = *signer;
  return b;
}

Status WriteSignedBundleFiles(const Bundle& b, const SecretKey& key, const std::string& path_without_ext) {
  const std::string bytes = EncodeSignedBundle(b, key);
  TUNE_RETURN_IF_ERROR(CheckReadableSize(bytes.size() - kEnvelopeHeaderBytes - kSignatureBytes, path_without_ext));
  TUNE_RETURN_IF_ERROR(WriteFileAtomically(path_without_ext + ".tfb", bytes));
  return WriteFileAtomically(path_without_ext + ".json", BundleToJson(b));
}

Result<Bundle> ReadVerifiedBundleFile(const std::string& path, const std::vector<PublicKey>& trusted,
                                      PublicKey* signed_by) {
  std::string bytes;
  Status st = ReadFileBytes(path, &bytes);
  if (!st.ok()) return Status::Error("bundle " + path + ": " + st.message());
  Result<Bundle> b = DecodeVerifiedBundle(bytes.data(), bytes.size(), trusted, signed_by);
  if (!b.ok()) return Status::Error("bundle " + path + ": " + b.status().message());
  return b;
}

}  // namespace tune
