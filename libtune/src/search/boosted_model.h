// A gradient-boosted classifier over config features (XGBoost's C API,
// Debian's libxgboost-dev): the model of the model-guided search. Trees
// suit the features (few axes of powers of two, device limits as cliffs),
// train in milliseconds on a few hundred rows, and are deterministic on
// one thread with a fixed seed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tune/status.h"

namespace tune {

class BoostedClassifier {
 public:
  // Trains on `rows` (each the same number of features, finite) with labels
  // 0 or 1 and per-row weights. Errors: no rows, ragged rows, XGBoost's own
  // message.
  static Result<BoostedClassifier> Train(const std::vector<std::vector<float>>& rows,
                                         const std::vector<float>& labels, const std::vector<float>& weights,
                                         uint64_t seed, int rounds = 40);
  BoostedClassifier(BoostedClassifier&&) noexcept;
  BoostedClassifier& operator=(BoostedClassifier&&) noexcept;
  ~BoostedClassifier();

  // P(label 1) per row. Errors: a row of another width, XGBoost's message.
  Result<std::vector<float>> Predict(const std::vector<std::vector<float>>& rows) const;

 private:
  BoostedClassifier();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tune
