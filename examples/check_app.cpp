// test_app on a new App before its first solve: a damped oscillator (2 unknowns, backward
// Euler). Run plain, it passes every check; with --broken its step adds into `out` instead of
// overwriting it, a mistake that gives wrong answers rather than a crash, and test_app names it.
//
//   mpirun -np 2 ./weft_example_check_app [--broken]
//
// Exit code 0 when every check passes, 1 otherwise (docs/mgrit.md, "Checking an App").
#include <mpi.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "weft/mgrit/app_check.hpp"
#include "weft/util/mpi.hpp"

namespace mgrit = weft::mgrit;

struct Oscillator {
  using State = std::array<double, 2>;  // position, velocity: trivially copyable
  bool broken = false;

  State init(double) const { return {1.0, 0.0}; }
  // Backward Euler for x' = v, v' = -x - 0.1 v.
  void step(const State& in, State& out, double t0, double t1, const mgrit::StepInfo&) const {
    const double h = t1 - t0, det = 1 + 0.1 * h + h * h;
    const State next = {((1 + 0.1 * h) * in[0] + h * in[1]) / det, (in[1] - h * in[0]) / det};
    for (int i = 0; i < 2; ++i) out[i] = broken ? out[i] + next[i] : next[i];
  }
  void sum(double a, const State& x, double b, State& y) const {
    for (int i = 0; i < 2; ++i) y[i] = a * x[i] + b * y[i];
  }
  double norm(const State& u) const { return std::hypot(u[0], u[1]); }
};

int main(int argc, char** argv) {
  weft::mpi::Environment env(&argc, &argv);
  Oscillator app;
  app.broken = argc > 1 && std::strcmp(argv[1], "--broken") == 0;
  mgrit::AppCheckOptions options;
  options.linear = true;  // the oscillator is linear: checked
  const mgrit::AppCheckReport report = mgrit::test_app(app, MPI_COMM_WORLD, options);
  if (weft::mpi::rank(MPI_COMM_WORLD) == 0) std::fputs(report.text().c_str(), stdout);
  return report.passed() ? 0 : 1;
}
