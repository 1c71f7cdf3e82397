// test_app (app_check.hpp): the model problems pass every check, at every rank count; each
// deliberately broken App fails exactly the check that names its fault.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "weft/mgrit/app_check.hpp"
#include "weft/mgrit/problems/dahlquist.hpp"
#include "weft/mgrit/problems/heat1d.hpp"
#include "weft/mgrit/problems/heat1d_spacetime.hpp"
#include "weft/mgrit/problems/lorenz.hpp"

namespace weft::mgrit {
namespace {

using problems::InitialGuess;

// The failed checks' names, in order.
std::vector<std::string> failed(const AppCheckReport& report) {
  std::vector<std::string> names;
  for (const auto& c : report.checks)
    if (!c.passed) names.push_back(c.name);
  return names;
}
const AppCheck& find(const AppCheckReport& report, const std::string& name) {
  for (const auto& c : report.checks)
    if (c.name == name) return c;
  throw std::runtime_error("no check " + name);
}
bool says(const AppCheckReport& report, const std::string& name, const std::string& words) {
  return find(report, name).detail.find(words) != std::string::npos;
}

// Delta correction's members (XBraid's braid_TestDelta): the Lorenz integrators pass; a Jacobian
// taken at the step's end point instead of its start fails the "delta" check, and only it.
struct LorenzWrongTangent : problems::Lorenz {
  using Lorenz::Lorenz;
  void step_tangent(const State& u0, const State& u1, State& v, double t0, double t1,
                    const StepInfo& info) const {
    Lorenz::step_tangent(u1, u0, v, t0, t1, info);
  }
};

TEST(AppCheck, DeltaCorrectionMembers) {
  using problems::Lorenz;
  for (const char* method : {"fe", "be", "rk4"}) {
    Lorenz lorenz(Lorenz::Parameters{}, Lorenz::parse_methods(method), 0.0,
                  InitialGuess::initial());
    const auto r = test_app(lorenz, MPI_COMM_WORLD);
    EXPECT_TRUE(r.passed()) << method << "\n" << r.text();
    EXPECT_TRUE(says(r, "delta", "step_tangent matches")) << r.text();
  }
  LorenzWrongTangent wrong(Lorenz::Parameters{}, Lorenz::parse_methods("fe"), 0.0,
                           InitialGuess::initial());
  AppCheckOptions quick;
  quick.solve = false;
  const auto r = test_app(wrong, MPI_COMM_WORLD, quick);
  EXPECT_EQ(failed(r), std::vector<std::string>{"delta"}) << r.text();
  EXPECT_TRUE(says(r, "delta", "central difference")) << r.text();
}

TEST(AppCheck, ModelProblemsPassEveryCheck) {
  problems::Dahlquist dahlquist(-1.0, problems::Integrator::BackwardEuler, 0.0,
                                InitialGuess::constant(0.456));
  AppCheckOptions linear;
  linear.linear = true;
  const auto d = test_app(dahlquist, MPI_COMM_WORLD, linear);
  EXPECT_TRUE(d.passed()) << d.text();
  EXPECT_EQ(d.checks.size(), 7u) << d.text();  // no spatial check without coarsen/refine

  problems::Heat1D heat(9, 0.0, 2.0, 0.0, InitialGuess::random(11));  // forced: affine
  const auto h = test_app(heat, MPI_COMM_WORLD);
  EXPECT_TRUE(h.passed()) << h.text();

  using problems::Heat1DSpaceTime;
  Heat1DSpaceTime spacetime(Heat1DSpaceTime::parse_nx("33,17,9"), 0.0, 1.0, 1.0,
                            Heat1DSpaceTime::parse_methods("be"), 0.0, InitialGuess::random(3));
  AppCheckOptions two;
  two.spatial_levels = 2;
  const auto s = test_app(spacetime, MPI_COMM_WORLD, two);
  EXPECT_TRUE(s.passed()) << s.text();
  EXPECT_TRUE(says(s, "space", "level 1 -> 2")) << s.text();
  EXPECT_TRUE(says(s, "solve", "rank(s)")) << s.text();
}

// A vector App that is right; the broken ones below each change one thing.
struct Decay : problems::VectorState {
  double lambda = -1.0;
  State init(double) const { return {1.0, -2.0, 0.5}; }
  void step(const State& in, State& out, double t0, double t1, const StepInfo&) {
    out.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] / (1 - lambda * (t1 - t0));
  }
};

TEST(AppCheck, StepAddingIntoOutFails) {
  struct App : Decay {
    void step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
      State fresh;
      Decay::step(in, fresh, t0, t1, info);
      if (out.size() != in.size()) out.assign(in.size(), 0.0);
      for (std::size_t i = 0; i < in.size(); ++i) out[i] += fresh[i];
    }
  } app;
  const auto r = test_app(app, MPI_COMM_WORLD);
  ASSERT_FALSE(failed(r).empty()) << r.text();
  EXPECT_EQ(failed(r).front(), "step") << r.text();
  EXPECT_TRUE(says(r, "step", "must overwrite out")) << r.text();
}

TEST(AppCheck, StepKeepingStateBetweenCallsFails) {
  struct App : Decay {
    int calls = 0;
    void step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
      Decay::step(in, out, t0, t1, info);
      out[0] += 1e-3 * ++calls;
    }
  } app;
  const auto r = test_app(app, MPI_COMM_WORLD);
  EXPECT_EQ(failed(r), (std::vector<std::string>{"step", "solve"})) << r.text();
  EXPECT_TRUE(says(r, "step", "no state kept between calls")) << r.text();
}

TEST(AppCheck, NonlinearStepClaimedLinearFails) {
  struct App : Decay {
    void step(const State& in, State& out, double t0, double t1, const StepInfo&) {
      out.resize(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] - (t1 - t0) * in[i] * in[i];
    }
  } app;
  AppCheckOptions linear;
  linear.linear = true;
  const auto r = test_app(app, MPI_COMM_WORLD, linear);
  EXPECT_EQ(failed(r), (std::vector<std::string>{"step"})) << r.text();
  EXPECT_TRUE(says(r, "step", "claimed linear")) << r.text();
  linear.linear = false;
  EXPECT_TRUE(test_app(app, MPI_COMM_WORLD, linear).passed());
}

TEST(AppCheck, ShallowCopyFails) {
  struct App {
    using State = std::shared_ptr<std::vector<double>>;
    State init(double) { return std::make_shared<std::vector<double>>(std::vector{1.0, 2.0}); }
    void step(const State& in, State& out, double, double, const StepInfo&) {
      out = std::make_shared<std::vector<double>>(*in);
      for (double& v : *out) v *= 0.5;
    }
    void sum(double a, const State& x, double b, State& y) {
      for (std::size_t i = 0; i < x->size(); ++i) (*y)[i] = a * (*x)[i] + b * (*y)[i];
    }
    double norm(const State& u) {
      double s = 0;
      for (double v : *u) s += v * v;
      return std::sqrt(s);
    }
    void copy(const State& src, State& dst) { dst = src; }  // shares the vector
    std::size_t buffer_size(const State& u) { return u->size() * sizeof(double); }
    void pack(const State& u, void* b) { std::memcpy(b, u->data(), buffer_size(u)); }
    void unpack(const void* b, State& u) { std::memcpy(u->data(), b, buffer_size(u)); }
  } app;
  AppCheckOptions o;
  o.solve = false;
  const auto r = test_app(app, MPI_COMM_WORLD, o);
  ASSERT_FALSE(failed(r).empty()) << r.text();
  EXPECT_EQ(failed(r).front(), "copy") << r.text();
  EXPECT_TRUE(says(r, "copy", "must not share storage")) << r.text();
}

TEST(AppCheck, PackPastItsSizeAndLossyPackFail) {
  struct Overflow : Decay {
    void pack(const State& u, void* b) const {
      Decay::pack(u, b);
      std::memset(static_cast<char*>(b) + buffer_size(u), 0, 8);
    }
  } overflow;
  AppCheckOptions o;
  o.solve = false;
  const auto r = test_app(overflow, MPI_COMM_WORLD, o);
  EXPECT_EQ(failed(r), (std::vector<std::string>{"buffer"})) << r.text();
  EXPECT_TRUE(says(r, "buffer", "pack wrote past buffer_size (24 bytes)")) << r.text();

  struct Lossy : Decay {  // single precision on the wire
    std::size_t buffer_size(const State& u) const { return u.size() * sizeof(float); }
    void pack(const State& u, void* b) const {
      for (std::size_t i = 0; i < u.size(); ++i) static_cast<float*>(b)[i] = float(u[i] / 3);
    }
    void unpack(const void* b, State& u) const {
      for (std::size_t i = 0; i < u.size(); ++i) u[i] = 3.0 * static_cast<const float*>(b)[i];
    }
  } lossy;
  const auto l = test_app(lossy, MPI_COMM_WORLD, o);
  EXPECT_EQ(failed(l), (std::vector<std::string>{"buffer"})) << l.text();
  EXPECT_TRUE(says(l, "buffer", "unpack(pack(u)) differs from u")) << l.text();
}

TEST(AppCheck, SignedNormFails) {
  struct App : Decay {
    double norm(const State& u) const {
      double s = 0;
      for (double v : u) s += v;
      return s;
    }
  } app;
  AppCheckOptions o;
  o.solve = false;
  const auto r = test_app(app, MPI_COMM_WORLD, o);
  ASSERT_FALSE(failed(r).empty()) << r.text();
  EXPECT_EQ(failed(r).front(), "norm") << r.text();
  EXPECT_TRUE(says(r, "norm", "homogeneous and non-negative")) << r.text();
}

// A two-grid spatial App: coarse states keep every other value.
struct Halving : Decay {
  State init(double) const { return {1.0, -2.0, 0.5, 4.0}; }
  void coarsen(const State& fine, State& coarse, int) const {
    coarse.resize(fine.size() / 2);
    for (std::size_t i = 0; i < coarse.size(); ++i) coarse[i] = fine[2 * i];
  }
  void refine(const State& coarse, State& fine, int) const {
    fine.resize(coarse.size() * 2);
    for (std::size_t i = 0; i < coarse.size(); ++i) fine[2 * i] = fine[2 * i + 1] = coarse[i];
  }
};

TEST(AppCheck, SpatialTransfersAreChecked) {
  Halving good;
  AppCheckOptions o;
  o.solve = false;
  const auto g = test_app(good, MPI_COMM_WORLD, o);
  EXPECT_TRUE(g.passed()) << g.text();
  EXPECT_TRUE(says(g, "space", "refine(coarsen(u)) is")) << g.text();

  struct Affine : Halving {
    void coarsen(const State& fine, State& coarse, int level) const {
      Halving::coarsen(fine, coarse, level);
      for (double& v : coarse) v += 1.0;
    }
  } affine;
  const auto a = test_app(affine, MPI_COMM_WORLD, o);
  EXPECT_EQ(failed(a), (std::vector<std::string>{"space"})) << a.text();
  EXPECT_TRUE(says(a, "space", "restriction must be linear")) << a.text();

  struct Short : Halving {
    void refine(const State& coarse, State& fine, int) const { fine = coarse; }
  } short_refine;
  const auto s = test_app(short_refine, MPI_COMM_WORLD, o);
  EXPECT_EQ(failed(s), (std::vector<std::string>{"space"})) << s.text();
  EXPECT_TRUE(says(s, "space", "refine must give a state of the finer level")) << s.text();
}

}  // namespace
}  // namespace weft::mgrit
