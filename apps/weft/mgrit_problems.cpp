// The problem registry of `weft mgrit`: one entry per model problem (at the bottom), each with
// its class that parses the flag values, describes the problem and runs it.
#include "mgrit_problems.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "mgrit_run.hpp"
#include "mgrit_settings.hpp"
#include "programs.hpp"
#include "weft/mgrit/problems/advection1d.hpp"
#include "weft/mgrit/problems/brusselator.hpp"
#include "weft/mgrit/problems/dahlquist_levels.hpp"
#include "weft/mgrit/problems/heat1d_periodic.hpp"
#include "weft/mgrit/problems/heat1d_spacetime.hpp"
#include "weft/mgrit/problems/heat2d.hpp"
#include "weft/mgrit/problems/linear.hpp"
#include "weft/mgrit/problems/space_time.hpp"

namespace weft::cli {
namespace {

namespace pr = mgrit::problems;
using json = nlohmann::json;

std::string with_integrator(const MgritSettings& s) {
  return "integrator " + s.integrator;
}

template <class Problem>
std::unique_ptr<MgritProblem> make(const ProblemValues& values) {
  return std::make_unique<Problem>(values);
}

class Heat1D final : public MgritProblem {
 public:
  explicit Heat1D(const ProblemValues& v)
      : nx_text_(v.text("--nx")),
        nx_(pr::Heat1DSpaceTime::parse_nx(nx_text_)),
        methods_(pr::Heat1DSpaceTime::parse_methods(v.text("--integrator"))),
        x0_(v.number("--x0")),
        x1_(parse_number("--x1", v.text("--x1"), "a finite number > --x0")),
        kappa_(v.positive("--kappa")) {
    if (!(x1_ > x0_))
      invalid_value("--x1", v.text("--x1"), "a finite number > --x0 (" + number(x0_) + ")");
  }
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("heat1d: u_t = kappa u_xx + f(x,t), kappa {}, nx {} on [{}, {}], {}",
                       number(kappa_), nx_text_, number(x0_), number(x1_), with_integrator(s));
  }
  void add_json(json& j) const override {
    j["nx"] = nx_.at(0);
    j["nx_per_level"] = nx_.items();
    j["x0"] = x0_;
    j["x1"] = x1_;
    j["kappa"] = kappa_;
  }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    pr::Heat1DSpaceTime heat(nx_, x0_, x1_, kappa_, methods_, s.t_start(), s.guess);
    if (s.gradient) return run_gradient(heat, s.entry->gradient_parameter, s, comm);
    return run_problem(heat, static_cast<int>(heat.interior(0)), s, world_layout(comm));
  }

 private:
  std::string nx_text_;
  pr::LevelList<int> nx_;
  pr::LevelList<pr::Heat1DSpaceTime::Method> methods_;
  double x0_, x1_, kappa_;
};

class Dahlquist final : public MgritProblem {
 public:
  explicit Dahlquist(const ProblemValues& v)
      : lambda_(v.number("--lambda")),
        integrators_(pr::DahlquistLevels::parse_integrators(v.text("--integrator"))) {}
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("dahlquist: u' = lambda u, lambda {}, {}", number(lambda_),
                       with_integrator(s));
  }
  void add_json(json& j) const override { j["lambda"] = lambda_; }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    pr::DahlquistLevels dahlquist(lambda_, integrators_, s.t_start(), s.guess);
    if (s.gradient) return run_gradient(dahlquist, s.entry->gradient_parameter, s, comm);
    return run_problem(dahlquist, 1, s, world_layout(comm));
  }

 private:
  double lambda_;
  pr::LevelList<pr::Integrator> integrators_;
};

class Linear final : public MgritProblem {
 public:
  explicit Linear(const ProblemValues& v)
      : p_{v.number("--a"), v.number("--b"), v.number("--c"), v.number("--u0")},
        methods_(pr::LinearOde::parse_methods(v.text("--integrator"))) {}
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("linear: u' = a u + b t + c, a {}, b {}, c {}, u0 {}, {}", number(p_.a),
                       number(p_.b), number(p_.c), number(p_.u0), with_integrator(s));
  }
  void add_json(json& j) const override {
    j["a"] = p_.a;
    j["b"] = p_.b;
    j["c"] = p_.c;
    j["u0"] = p_.u0;
  }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    pr::LinearOde ode(p_, methods_, s.t_start(), s.guess);
    return run_problem(ode, 1, s, world_layout(comm));
  }

 private:
  pr::LinearOde::Parameters p_;
  pr::LevelList<pr::LinearOde::Method> methods_;
};

class Heat1DPeriodic final : public MgritProblem {
 public:
  explicit Heat1DPeriodic(const ProblemValues& v)
      : nx_(v.integer("--nx", 3, "an integer >= 3 (grid nodes)")),
        methods_(pr::Heat1DPeriodic::parse_methods(v.text("--integrator"))) {}
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("heat1d-periodic: u_t = u_xx on a ring, nx {}, {}", nx_, with_integrator(s));
  }
  void add_json(json& j) const override { j["nx"] = nx_; }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    pr::Heat1DPeriodic heat(nx_, methods_, s.t_start(), s.guess);
    return run_problem(heat, static_cast<int>(heat.nodes()), s, world_layout(comm));
  }

 private:
  int nx_;
  pr::LevelList<pr::Heat1DPeriodic::Method> methods_;
};

class Heat2D final : public MgritProblem {
 public:
  explicit Heat2D(const ProblemValues& v)
      : methods_(pr::Heat2D::parse_methods(v.text("--integrator"))),
        ksp_(v.text("--ksp")),
        ksp_given_(v.given("--ksp")) {
    const std::string points = "an integer >= 3 (grid points incl. the 2 boundary points)";
    grid_.nx = v.integer("--nx", 3, points);
    grid_.ny = v.given("--ny") ? v.integer("--ny", 3, points) : grid_.nx;
    grid_.lx = v.positive("--lx");
    grid_.ly = v.positive("--ly");
    space_ranks_ = v.integer("--space-ranks", 1, "an integer >= 1 that divides the rank count");
    parse_choice("--ksp", ksp_, {"cg", "lu"});
  }
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("heat2d: u_t = Laplace u + f, {} x {} points on [0, {}] x [0, {}], {}{}",
                       grid_.nx, grid_.ny, number(grid_.lx), number(grid_.ly), with_integrator(s),
                       pr::petsc_available()
                           ? fmt::format(", PETSc ksp {}, space ranks {}", ksp_, space_ranks_)
                           : std::string());
  }
  void add_json(json& j) const override {
    j["nx"] = grid_.nx;
    j["ny"] = grid_.ny;
    j["lx"] = grid_.lx;
    j["ly"] = grid_.ly;
    j["space_ranks"] = space_ranks_;
    j["petsc"] = pr::petsc_available();
    if (pr::petsc_available()) j["ksp"] = ksp_;
  }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    if (space_ranks_ > 1) pr::require_petsc("Heat2D", "space_ranks", std::to_string(space_ranks_));
#ifdef WEFT_HAVE_PETSC
    // PETSc for every space rank count, so that runs at different counts compare like with like.
    auto comms = pr::split_space_time(comm, space_ranks_);
    const pr::KspSettings ksp = pr::KspSettings::parse(ksp_);
    pr::PetscSession session;
    const Layout layout{comms.time.get(), mpi::rank(comm) == 0, comms.space_rank == 0};
    // The App (and every PETSc object) ends before the session.
    pr::PetscHeat2D app(comms.space.get(), grid_, methods_, s.t_start(), s.guess, ksp);
    try {
      return run_problem(app, static_cast<int>(grid_.unknowns()), s, layout);
    } catch (const Divergence& e) {
      // A KSP failure is collective over one time group only: with several groups the others
      // wait for it in the time communicator, so it must abort every rank (still exit code 1).
      // MGRIT's own divergence (a reduced residual) is collective and stays a Divergence.
      const std::string what = e.what();
      if (comms.time_ranks > 1 && what.rfind("PetscHeat2D:", 0) == 0) throw Error(what);
      throw;
    }
#else
    if (ksp_given_) pr::require_petsc("Heat2D", "ksp", ksp_);
    pr::Heat2D app(grid_, methods_, s.t_start(), s.guess);
    return run_problem(app, static_cast<int>(grid_.unknowns()), s, world_layout(comm));
#endif
  }

 private:
  pr::Heat2DGrid grid_{};
  pr::LevelList<pr::Heat2D::Method> methods_;
  int space_ranks_ = 1;
  std::string ksp_;
  bool ksp_given_;
};

class Advection1D final : public MgritProblem {
 public:
  explicit Advection1D(const ProblemValues& v)
      : nx_(v.integer("--nx", 3, "an integer >= 3 (grid nodes)")),
        speed_(parse_number("--speed", v.text("--speed"), "a finite number != 0")),
        methods_(pr::Advection1D::parse_methods(v.text("--integrator"))) {
    if (speed_ == 0) invalid_value("--speed", v.text("--speed"), "a finite number != 0");
  }
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("advection1d: u_t + a u_x = 0 on a ring, a {}, nx {}, {}", number(speed_),
                       nx_, with_integrator(s));
  }
  void add_json(json& j) const override {
    j["nx"] = nx_;
    j["speed"] = speed_;
  }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    pr::Advection1D adv(nx_, speed_, methods_, s.t_start(), s.guess);
    return run_problem(adv, static_cast<int>(adv.nodes()), s, world_layout(comm));
  }

 private:
  int nx_;
  double speed_;
  pr::LevelList<pr::Advection1D::Method> methods_;
};

class Brusselator final : public MgritProblem {
 public:
  explicit Brusselator(const ProblemValues& v)
      : A_(v.number("--A")),
        B_(v.number("--B")),
        methods_(pr::Brusselator::parse_methods(v.text("--integrator"))) {}
  std::string describe(const MgritSettings& s) const override {
    return fmt::format("brusselator: A {}, B {}, {}", number(A_), number(B_), with_integrator(s));
  }
  void add_json(json& j) const override {
    j["A"] = A_;
    j["B"] = B_;
  }
  int run(const MgritSettings& s, MPI_Comm comm) override {
    pr::Brusselator bru(A_, B_, methods_, s.t_start(), s.guess);
    return run_problem(bru, 2, s, world_layout(comm));
  }

 private:
  double A_, B_;
  pr::LevelList<pr::Brusselator::Method> methods_;
};

constexpr const char* kIntegrator = "NAME[,NAME...]";

}  // namespace

// The registry. --help lists the problems and their flags in this order; the first is the
// default problem (the PyMGRIT heat reference run (docs/mgrit.md, §4)).
const std::vector<ProblemEntry>& mgrit_problems() {
  static const std::vector<ProblemEntry> problems = {
      {"heat1d",
       "u_t = kappa u_xx + f on [x0, x1], Dirichlet, space-time coarsening (PyMGRIT's heat1d)",
       {{"--integrator", kIntegrator, "be", "be, cn per level", "integrator"},
        {"--nx", "INT[,INT...]", "5",
         "grid points per level incl. the boundary, each coarser grid keeping or halving the "
         "intervals",
         "nx"},
        {"--x0", "X", "0", "left end of the domain", "x0"},
        {"--x1", "X", "2", "right end of the domain", "x1"},
        {"--kappa", "X", "1", "diffusion coefficient > 0", "kappa"}},
       "kappa",
       make<Heat1D>},
      {"dahlquist",
       "u' = lambda u, u(0) = 1",
       {{"--integrator", kIntegrator, "be", "be, fe, tr, mr per level", "integrator"},
        {"--lambda", "X", "-1", "u' = lambda u", "lambda"}},
       "lambda",
       make<Dahlquist>},
      {"linear",
       "u' = a u + b t + c",
       {{"--integrator", kIntegrator, "be", "be, sdirk2 per level", "integrator"},
        {"--a", "X", "-1", "u' = a u + b t + c", "a"},
        {"--b", "X", "1", "see --a", "b"},
        {"--c", "X", "0", "see --a", "c"},
        {"--u0", "X", "1", "initial value", "u0"}},
       nullptr,
       make<Linear>},
      {"heat1d-periodic",
       "u_t = u_xx on a ring",
       {{"--integrator", kIntegrator, "be", "be, cn per level", "integrator"},
        {"--nx", "INT", "33", "nodes on the ring", "nx"}},
       nullptr,
       make<Heat1DPeriodic>},
      {"heat2d",
       "u_t = Laplace u + f on a rectangle, Dirichlet (space-parallel over PETSc)",
       {{"--integrator", kIntegrator, "be", "be, cn per level", "integrator"},
        {"--nx", "INT", "33", "points in x incl. the boundary", "nx"},
        {"--ny", "INT", "", "points in y incl. the boundary (default: --nx)", "ny"},
        {"--lx", "X", "1", "width of the rectangle", "lx"},
        {"--ly", "X", "1", "height of the rectangle", "ly"},
        {"--space-ranks", "INT", "1", "ranks per time step (PETSc; must divide the rank count)",
         "space_ranks"},
        {"--ksp", "cg|lu", "cg", "with PETSc: linear solver of each step", "ksp"}},
       nullptr,
       make<Heat2D>},
      {"advection1d",
       "u_t + a u_x = 0 on a ring, upwind",
       {{"--integrator", kIntegrator, "be", "fe, be per level", "integrator"},
        {"--nx", "INT", "64", "nodes on the ring", "nx"},
        {"--speed", "X", "1", "advection speed a != 0", "speed"}},
       nullptr,
       make<Advection1D>},
      {"brusselator",
       "the Brusselator ODE system, explicit Runge-Kutta",
       {{"--integrator", kIntegrator, "rk4", "rk4, rk2 per level", "integrator"},
        {"--A", "X", "1", "parameter A", "A"},
        {"--B", "X", "3", "parameter B", "B"}},
       nullptr,
       make<Brusselator>},
  };
  return problems;
}

const ProblemEntry* find_mgrit_problem(const std::string& name) {
  for (const ProblemEntry& e : mgrit_problems())
    if (name == e.name) return &e;
  return nullptr;
}

bool heat2d_has_petsc() {
#ifdef WEFT_HAVE_PETSC
  return true;
#else
  return false;
#endif
}

}  // namespace weft::cli
