#pragma once
// The App state operations shared by the model problems whose state is a std::vector<double>
// with the plain Euclidean spatial norm. A problem inherits them. unpack() keeps the size of
// the state it is given: the solver always unpacks into a state of the receiving level, so the
// same operations serve problems whose grid changes between levels.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

namespace weft::mgrit::problems {

class VectorState {
 public:
  using State = std::vector<double>;

  void sum(double a, const State& x, double b, State& y) const {
    y.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = a * x[i] + b * y[i];
  }
  double norm(const State& u) const {
    double s = 0;
    for (double v : u) s += v * v;
    return std::sqrt(s);
  }
  void copy(const State& src, State& dst) const { dst = src; }
  std::size_t buffer_size(const State& like) const { return like.size() * sizeof(double); }
  void pack(const State& u, void* buffer) const {
    std::memcpy(buffer, u.data(), u.size() * sizeof(double));
  }
  void unpack(const void* buffer, State& u) const {
    std::memcpy(u.data(), buffer, u.size() * sizeof(double));
  }
};

}  // namespace weft::mgrit::problems
