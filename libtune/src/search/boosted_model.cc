#include "search/boosted_model.h"

#include <xgboost/c_api.h>

#include <string>

namespace tune {
namespace {

Status XgbError(const char* what) { return Status::Error(std::string("xgboost: ") + what + ": " + XGBGetLastError()); }

// A DMatrix of `rows`, freed with its owner.
struct Matrix {
  DMatrixHandle h = nullptr;
  ~Matrix() {
    if (h) XGDMatrixFree(h);
  }
};

Status Fill(const std::vector<std::vector<float>>& rows, size_t width, Matrix* m) {
  std::vector<float> flat;
  flat.reserve(rows.size() * width);
  for (const auto& r : rows) {
    if (r.size() != width) return Status::InvalidArgument("rows of different widths");
    flat.insert(flat.end(), r.begin(), r.end());
  }
  if (XGDMatrixCreateFromMat(flat.data(), rows.size(), width, -1e30f, &m->h) != 0)
    return XgbError("matrix");
  return Status::OK();
}

}  // namespace

struct BoostedClassifier::Impl {
  BoosterHandle booster = nullptr;
  size_t width = 0;
  ~Impl() {
    if (booster) XGBoosterFree(booster);
  }
};

BoostedClassifier::BoostedClassifier() : impl_(std::make_unique<Impl>()) {}
BoostedClassifier::BoostedClassifier(BoostedClassifier&&) noexcept = default;
BoostedClassifier& BoostedClassifier::operator=(BoostedClassifier&&) noexcept = default;
BoostedClassifier::~BoostedClassifier() = default;

Result<BoostedClassifier> BoostedClassifier::Train(const std::vector<std::vector<float>>& rows,
                                                   const std::vector<float>& labels,
                                                   const std::vector<float>& weights, uint64_t seed, int rounds) {
  if (rows.empty() || rows[0].empty()) return Status::InvalidArgument("no rows to train on");
  if (labels.size() != rows.size() || weights.size() != rows.size())
    return Status::InvalidArgument("labels or weights do not match the rows");
  BoostedClassifier model;
  model.impl_->width = rows[0].size();
  Matrix train;
  if (Status s = Fill(rows, model.impl_->width, &train); !s.ok()) return s;
  if (XGDMatrixSetFloatInfo(train.h, "label", labels.data(), labels.size()) != 0) return XgbError("labels");
  if (XGDMatrixSetFloatInfo(train.h, "weight", weights.data(), weights.size()) != 0) return XgbError("weights");
  if (XGBoosterCreate(&train.h, 1, &model.impl_->booster) != 0) return XgbError("booster");
  const std::string seed_text = std::to_string(seed % 2147483647);
  const std::pair<const char*, const char*> params[] = {
      {"objective", "binary:logistic"}, {"max_depth", "4"},  {"eta", "0.3"},        {"min_child_weight", "0.5"},
      {"nthread", "1"},                 {"verbosity", "0"}, {"seed", seed_text.c_str()}, {"base_score", "0.1"}};
  for (const auto& [k, v] : params)
    if (XGBoosterSetParam(model.impl_->booster, k, v) != 0) return XgbError(k);
  for (int i = 0; i < rounds; ++i)
    if (XGBoosterUpdateOneIter(model.impl_->booster, i, train.h) != 0) return XgbError("training");
  return model;
}

Result<std::vector<float>> BoostedClassifier::Predict(const std::vector<std::vector<float>>& rows) const {
  if (rows.empty()) return std::vector<float>{};
  Matrix m;
  if (Status s = Fill(rows, impl_->width, &m); !s.ok()) return s;
  bst_ulong len = 0;
  const float* out = nullptr;
  if (XGBoosterPredict(impl_->booster, m.h, 0, 0, 0, &len, &out) != 0) return XgbError("prediction");
  if (len != rows.size()) return Status::Error("xgboost: prediction of another length than the rows");
  return std::vector<float>(out, out + len);
}

}  // namespace tune
