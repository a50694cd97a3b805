// AbsMaxObserver (see activation_observer.h).
#include "model/activation_observer.h"

#include <algorithm>
#include <cmath>

namespace sparkserve::model {

float AbsMax(const float* x, int64_t count) {
  float m = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;  // NaN compares false: ignored
  }
  return m;
}

const float* AbsMaxObserver::OnLinearInput(const std::string& module, const float* x, int64_t rows, int64_t in) {
  const float m = AbsMax(x, rows * in);
  std::lock_guard<std::mutex> lock(mu_);
  float& cur = input_amax_[module];
  cur = std::max(cur, m);
  input_rows_[module] += rows;
  return x;
}

void AbsMaxObserver::OnKvWrite(const std::string& attention, float* k, float* v, int64_t count) {
  const float mk = AbsMax(k, count), mv = AbsMax(v, count);
  std::lock_guard<std::mutex> lock(mu_);
  auto& cur = kv_amax_[attention];
  cur.first = std::max(cur.first, mk);
  cur.second = std::max(cur.second, mv);
}

std::map<std::string, float> AbsMaxObserver::input_amax() const {
  std::lock_guard<std::mutex> lock(mu_);
  return input_amax_;
}

std::map<std::string, std::pair<float, float>> AbsMaxObserver::kv_amax() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kv_amax_;
}

std::map<std::string, int64_t> AbsMaxObserver::input_rows() const {
  std::lock_guard<std::mutex> lock(mu_);
  return input_rows_;
}

}  // namespace sparkserve::model
