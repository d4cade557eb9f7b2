// The rankers of the search: XGBoost's rank:pairwise through its C API (Debian's
// libxgboost-dev), and a neighbour ranker when the build has no XGBoost.
#include <cmath>
#include <string>

#include "support/Diagnostic.h"
#include "tune/Search.h"

#ifdef TESSERA_HAVE_XGBOOST
#include <xgboost/c_api.h>
#endif

namespace tessera::tune {

namespace {

class NeighbourRanker : public Ranker {
 public:
  void fit(const std::vector<std::vector<float>>& rows, const std::vector<float>& relevance,
           const std::vector<unsigned>&) override {
    rows_ = rows;
    rel_ = relevance;
    // Scale each feature by its spread so that no one feature's units dominate the distance.
    scale_.assign(rows.empty() ? 0 : rows[0].size(), 1.0f);
    for (size_t f = 0; f < scale_.size(); ++f) {
      float lo = rows[0][f], hi = rows[0][f];
      for (const auto& r : rows) lo = std::min(lo, r[f]), hi = std::max(hi, r[f]);
      scale_[f] = hi > lo ? 1.0f / (hi - lo) : 0.0f;
    }
  }
  std::vector<float> predict(const std::vector<std::vector<float>>& rows) const override {
    std::vector<float> out;
    for (const auto& x : rows) {
      double s = 0;
      for (size_t i = 0; i < rows_.size(); ++i) {
        double d = 0;
        for (size_t f = 0; f < x.size() && f < scale_.size(); ++f) {
          double e = (x[f] - rows_[i][f]) * scale_[f];
          d += e * e;
        }
        s += (rel_[i] - 5.0) * std::exp(-8 * d);
      }
      out.push_back(static_cast<float>(s));
    }
    return out;
  }
  std::string name() const override { return "neighbour"; }

 private:
  std::vector<std::vector<float>> rows_;
  std::vector<float> rel_, scale_;
};

#ifdef TESSERA_HAVE_XGBOOST

void xgb_check(int rc, const char* what) {
  if (rc != 0) throw TesseraError(std::string("tune: XGBoost ") + what + ": " + XGBGetLastError());
}

struct Matrix {
  DMatrixHandle h = nullptr;
  explicit Matrix(const std::vector<std::vector<float>>& rows) {
    const size_t cols = rows.empty() ? 0 : rows[0].size();
    std::vector<float> flat;
    flat.reserve(rows.size() * cols);
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    xgb_check(XGDMatrixCreateFromMat(flat.data(), rows.size(), cols, NAN, &h), "matrix");
  }
  ~Matrix() { XGDMatrixFree(h); }
};

class XgbRanker : public Ranker {
 public:
  explicit XgbRanker(uint64_t seed) : seed_(seed) {}
  ~XgbRanker() override {
    if (booster_) XGBoosterFree(booster_);
  }
  void fit(const std::vector<std::vector<float>>& rows, const std::vector<float>& relevance,
           const std::vector<unsigned>& group_sizes) override {
    Matrix m(rows);
    xgb_check(XGDMatrixSetFloatInfo(m.h, "label", relevance.data(), relevance.size()), "labels");
    xgb_check(XGDMatrixSetUIntInfo(m.h, "group", group_sizes.data(), group_sizes.size()), "groups");
    if (booster_) XGBoosterFree(booster_);
    booster_ = nullptr;
    xgb_check(XGBoosterCreate(&m.h, 1, &booster_), "booster");
    // One thread: the tuner forks its measuring children, and an OpenMP team in the parent
    // would not survive the fork; the data is small.
    const std::pair<const char*, std::string> params[] = {
        {"objective", "rank:pairwise"}, {"eta", "0.3"},  {"max_depth", "4"},      {"min_child_weight", "0"},
        {"nthread", "1"},               {"verbosity", "0"}, {"seed", std::to_string(seed_ % 2147483647)},
    };
    for (const auto& [k, v] : params) xgb_check(XGBoosterSetParam(booster_, k, v.c_str()), "parameter");
    for (int it = 0; it < 30; ++it) xgb_check(XGBoosterUpdateOneIter(booster_, it, m.h), "training");
  }
  std::vector<float> predict(const std::vector<std::vector<float>>& rows) const override {
    if (!booster_) throw TesseraError("tune: the ranker predicts before it was fitted");
    Matrix m(rows);
    bst_ulong len = 0;
    const float* out = nullptr;
    xgb_check(XGBoosterPredict(booster_, m.h, 0, 0, 0, &len, &out), "prediction");
    return std::vector<float>(out, out + len);
  }
  std::string name() const override { return "xgboost rank:pairwise"; }

 private:
  uint64_t seed_;
  BoosterHandle booster_ = nullptr;
};

#endif

}  // namespace

bool have_xgboost() {
#ifdef TESSERA_HAVE_XGBOOST
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Ranker> make_neighbour_ranker() { return std::make_unique<NeighbourRanker>(); }

std::unique_ptr<Ranker> make_ranker(uint64_t seed) {
#ifdef TESSERA_HAVE_XGBOOST
  return std::make_unique<XgbRanker>(seed);
#else
  (void)seed;
  return make_neighbour_ranker();
#endif
}

}  // namespace tessera::tune
