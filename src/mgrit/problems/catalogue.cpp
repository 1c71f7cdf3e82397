// The catalogue of model problems: one class per problem (parse its parameters, describe it,
// run it) and the table at the bottom. Compiled twice: into weft_catalogue, and with
// WEFT_HAVE_PETSC into weft_petsc_catalogue, whose heat2d runs over PETSc.
#include "weft/mgrit/problems/catalogue.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "run_problem.hpp"
#include "weft/mgrit/problems/advection1d.hpp"
#include "weft/mgrit/problems/brusselator.hpp"
#include "weft/mgrit/problems/dahlquist_levels.hpp"
#include "weft/mgrit/problems/heat1d_periodic.hpp"
#include "weft/mgrit/problems/heat1d_spacetime.hpp"
#include "weft/mgrit/problems/heat2d.hpp"
#include "weft/mgrit/problems/linear.hpp"
#include "weft/mgrit/problems/lorenz.hpp"
#include "weft/mgrit/problems/space_time.hpp"
#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

// ------------------------------------------------------------------------------------------
// ParameterValues

namespace {
constexpr long long kIntMax = std::numeric_limits<int>::max();

std::vector<std::pair<std::string, std::string>> fallbacks_of(const CatalogueEntry& entry) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Parameter& p : entry.parameters) out.emplace_back(p.name, p.fallback);
  return out;
}
}  // namespace

ParameterValues::ParameterValues(const CatalogueEntry& entry,
                                 const std::map<std::string, std::string>& given, Spelling spell)
    : TextValues(entry.name, given, fallbacks_of(entry), std::move(spell)) {}

// ------------------------------------------------------------------------------------------
// The problems

namespace {

using detail::Layout;
using detail::run_gradient;
using detail::run_problem;
using Values = std::vector<std::pair<std::string, ParameterValue>>;

std::string number(double x) {
  return number_text(x);
}

Layout world_layout(MPI_Comm comm) {
  return Layout{comm, true};
}

template <class Problem>
std::unique_ptr<ModelProblem> make(const ParameterValues& values) {
  return std::make_unique<Problem>(values);
}

std::vector<long long> as_longs(const std::vector<int>& v) {
  return {v.begin(), v.end()};
}

// What every problem keeps: its name and integrator list (the report names both).
class Named : public ModelProblem {
 protected:
  explicit Named(const ParameterValues& v) : integrator_(v.text("integrator")) {}
  std::string integrator_text() const { return "integrator " + integrator_; }
  std::string integrator_;
};

class Heat1DProblem final : public Named {
 public:
  explicit Heat1DProblem(const ParameterValues& v)
      : Named(v),
        nx_text_(v.text("nx")),
        nx_(Heat1DSpaceTime::parse_nx(nx_text_)),
        methods_(Heat1DSpaceTime::parse_methods(v.text("integrator"))),
        x0_(v.number("x0")),
        x1_(v.number("x1", "a finite number > the left end")),
        kappa_(v.positive("kappa")) {
    if (!(x1_ > x0_)) v.invalid("x1", "a finite number > the left end (" + number(x0_) + ")");
  }
  std::string describe() const override {
    return "heat1d: u_t = kappa u_xx + f(x,t), kappa " + number(kappa_) + ", nx " + nx_text_ +
           " on [" + number(x0_) + ", " + number(x1_) + "], " + integrator_text();
  }
  Values parameters() const override {
    return {{"nx", static_cast<long long>(nx_.at(0))},
            {"nx_per_level", as_longs(nx_.items())},
            {"x0", x0_},
            {"x1", x1_},
            {"kappa", kappa_}};
  }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    Heat1DSpaceTime heat(nx_, x0_, x1_, kappa_, methods_, s.t_start(), s.guess);
    if (s.gradient) return run_gradient(heat, "kappa", s, comm);
    return run_problem(heat, static_cast<int>(heat.interior(0)), s, world_layout(comm));
  }

 private:
  std::string nx_text_;
  LevelList<int> nx_;
  LevelList<Heat1DSpaceTime::Method> methods_;
  double x0_, x1_, kappa_;
};

class DahlquistProblem final : public Named {
 public:
  explicit DahlquistProblem(const ParameterValues& v)
      : Named(v),
        lambda_(v.number("lambda")),
        integrators_(DahlquistLevels::parse_integrators(v.text("integrator"))) {}
  std::string describe() const override {
    return "dahlquist: u' = lambda u, lambda " + number(lambda_) + ", " + integrator_text();
  }
  Values parameters() const override { return {{"lambda", lambda_}}; }
  int local_order() const override {
    const Integrator fine = integrators_.at(0);
    return fine == Integrator::BackwardEuler || fine == Integrator::ForwardEuler ? 2 : 3;
  }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    DahlquistLevels dahlquist(lambda_, integrators_, s.t_start(), s.guess);
    if (s.gradient) return run_gradient(dahlquist, "lambda", s, comm);
    return run_problem(dahlquist, 1, s, world_layout(comm));
  }

 private:
  double lambda_;
  LevelList<Integrator> integrators_;
};

class Linear final : public Named {
 public:
  explicit Linear(const ParameterValues& v)
      : Named(v),
        p_{v.number("a"), v.number("b"), v.number("c"), v.number("u0")},
        methods_(LinearOde::parse_methods(v.text("integrator"))) {}
  std::string describe() const override {
    return "linear: u' = a u + b t + c, a " + number(p_.a) + ", b " + number(p_.b) + ", c " +
           number(p_.c) + ", u0 " + number(p_.u0) + ", " + integrator_text();
  }
  Values parameters() const override {
    return {{"a", p_.a}, {"b", p_.b}, {"c", p_.c}, {"u0", p_.u0}};
  }
  int local_order() const override { return methods_.at(0) == LinearOde::Method::Sdirk2 ? 3 : 2; }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    LinearOde ode(p_, methods_, s.t_start(), s.guess);
    ode.refine_fraction(s.refine_fraction);
    return run_problem(ode, 1, s, world_layout(comm));
  }

 private:
  LinearOde::Parameters p_;
  LevelList<LinearOde::Method> methods_;
};

class Heat1DRing final : public Named {
 public:
  explicit Heat1DRing(const ParameterValues& v)
      : Named(v),
        nx_(static_cast<int>(v.integer("nx", 3, "an integer >= 3 (grid nodes)", kIntMax))),
        methods_(Heat1DPeriodic::parse_methods(v.text("integrator"))) {}
  std::string describe() const override {
    return "heat1d-periodic: u_t = u_xx on a ring, nx " + std::to_string(nx_) + ", " +
           integrator_text();
  }
  Values parameters() const override { return {{"nx", static_cast<long long>(nx_)}}; }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    Heat1DPeriodic heat(nx_, methods_, s.t_start(), s.guess);
    return run_problem(heat, static_cast<int>(heat.nodes()), s, world_layout(comm));
  }

 private:
  int nx_;
  LevelList<Heat1DPeriodic::Method> methods_;
};

class Heat2DProblem final : public Named {
 public:
  explicit Heat2DProblem(const ParameterValues& v)
      : Named(v),
        methods_(Heat2D::parse_methods(v.text("integrator"))),
        ksp_(v.text("ksp")),
        ksp_given_(v.given("ksp")) {
    const std::string points = "an integer >= 3 (grid points incl. the 2 boundary points)";
    grid_.nx = static_cast<int>(v.integer("nx", 3, points, kIntMax));
    grid_.ny = v.given("ny") ? static_cast<int>(v.integer("ny", 3, points, kIntMax)) : grid_.nx;
    grid_.lx = v.positive("lx");
    grid_.ly = v.positive("ly");
    space_ranks_ = static_cast<int>(
        v.integer("space_ranks", 1, "an integer >= 1 that divides the rank count", kIntMax));
    if (ksp_ != "cg" && ksp_ != "lu") v.invalid("ksp", "cg, lu");
  }
  std::string describe() const override {
    return "heat2d: u_t = Laplace u + f, " + std::to_string(grid_.nx) + " x " +
           std::to_string(grid_.ny) + " points on [0, " + number(grid_.lx) + "] x [0, " +
           number(grid_.ly) + "], " + integrator_text() +
           (petsc_available()
                ? ", PETSc ksp " + ksp_ + ", space ranks " + std::to_string(space_ranks_)
                : std::string());
  }
  Values parameters() const override {
    Values v{{"nx", static_cast<long long>(grid_.nx)},
             {"ny", static_cast<long long>(grid_.ny)},
             {"lx", grid_.lx},
             {"ly", grid_.ly},
             {"space_ranks", static_cast<long long>(space_ranks_)},
             {"petsc", petsc_available()}};
    if (petsc_available()) v.emplace_back("ksp", ksp_);
    return v;
  }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    if (space_ranks_ > 1) require_petsc("Heat2D", "space_ranks", std::to_string(space_ranks_));
#ifdef WEFT_HAVE_PETSC
    // PETSc for every space rank count, so that runs at different counts compare like with like.
    auto comms = split_space_time(comm, space_ranks_);
    const KspSettings ksp = KspSettings::parse(ksp_);
    PetscSession session;
    const Layout layout{comms.time.get(), comms.space_rank == 0};
    // The App (and every PETSc object) ends before the session.
    PetscHeat2D app(comms.space.get(), grid_, methods_, s.t_start(), s.guess, ksp);
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
    if (ksp_given_) require_petsc("Heat2D", "ksp", ksp_);
    Heat2D app(grid_, methods_, s.t_start(), s.guess);
    return run_problem(app, static_cast<int>(grid_.unknowns()), s, world_layout(comm));
#endif
  }

 private:
  Heat2DGrid grid_{};
  LevelList<Heat2D::Method> methods_;
  int space_ranks_ = 1;
  std::string ksp_;
  bool ksp_given_;
};

class Advection final : public Named {
 public:
  explicit Advection(const ParameterValues& v)
      : Named(v),
        nx_(static_cast<int>(v.integer("nx", 3, "an integer >= 3 (grid nodes)", kIntMax))),
        speed_(v.number("speed", "a finite number != 0")),
        methods_(Advection1D::parse_methods(v.text("integrator"))) {
    if (speed_ == 0) v.invalid("speed", "a finite number != 0");
  }
  std::string describe() const override {
    return "advection1d: u_t + a u_x = 0 on a ring, a " + number(speed_) + ", nx " +
           std::to_string(nx_) + ", " + integrator_text();
  }
  Values parameters() const override {
    return {{"nx", static_cast<long long>(nx_)}, {"speed", speed_}};
  }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    Advection1D adv(nx_, speed_, methods_, s.t_start(), s.guess);
    return run_problem(adv, static_cast<int>(adv.nodes()), s, world_layout(comm));
  }

 private:
  int nx_;
  double speed_;
  LevelList<Advection1D::Method> methods_;
};

class BrusselatorProblem final : public Named {
 public:
  explicit BrusselatorProblem(const ParameterValues& v)
      : Named(v),
        A_(v.number("A")),
        B_(v.number("B")),
        methods_(Brusselator::parse_methods(v.text("integrator"))) {}
  std::string describe() const override {
    return "brusselator: A " + number(A_) + ", B " + number(B_) + ", " + integrator_text();
  }
  Values parameters() const override { return {{"A", A_}, {"B", B_}}; }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    Brusselator bru(A_, B_, methods_, s.t_start(), s.guess);
    return run_problem(bru, 2, s, world_layout(comm));
  }

 private:
  double A_, B_;
  LevelList<Brusselator::Method> methods_;
};

class LorenzProblem final : public Named {
 public:
  explicit LorenzProblem(const ParameterValues& v)
      : Named(v),
        p_{v.number("sigma"), v.number("rho"), v.number("beta")},
        methods_(Lorenz::parse_methods(v.text("integrator"))) {}
  std::string describe() const override {
    return "lorenz: sigma " + number(p_.sigma) + ", rho " + number(p_.rho) + ", beta " +
           number(p_.beta) + ", from ex-07's point near the attractor, " + integrator_text();
  }
  Values parameters() const override {
    return {{"sigma", p_.sigma}, {"rho", p_.rho}, {"beta", p_.beta}};
  }
  int delta_dimension() const override { return 3; }
  RunSummary run(const RunSettings& s, MPI_Comm comm) override {
    Lorenz lorenz(p_, methods_, s.t_start(), s.guess);
    try {
      if (s.delta_rank > 0) return run_delta_corrected(lorenz, 3, s, world_layout(comm));
      return run_problem(lorenz, 3, s, world_layout(comm));
    } catch (const Divergence& e) {
      // A failed Newton step or basis is local to one rank: with several ranks the others
      // wait for it, so it must abort them all (still exit code 1). MGRIT's own divergence (a
      // reduced residual) is collective and stays a Divergence.
      const std::string what = e.what();
      if (mpi::size(comm) > 1 &&
          (what.rfind("Lorenz:", 0) == 0 || what.rfind("Delta correction:", 0) == 0))
        throw Error(what);
      throw;
    }
  }

 private:
  Lorenz::Parameters p_;
  LevelList<Lorenz::Method> methods_;
};

constexpr const char* kIntegrator = "NAME[,NAME...]";

}  // namespace

// The catalogue, in the order front ends list it; the first is the default problem (the
// PyMGRIT heat reference run (docs/mgrit.md, §4)).
const std::vector<CatalogueEntry>& catalogue() {
  static const std::vector<CatalogueEntry> entries = {
      {"heat1d",
       "u_t = kappa u_xx + f on [x0, x1], Dirichlet, space-time coarsening (PyMGRIT's heat1d)",
       {{"integrator", kIntegrator, "be", "be, cn per level"},
        {"nx", "INT[,INT...]", "5",
         "grid points per level incl. the boundary, each coarser grid keeping or halving the "
         "intervals"},
        {"x0", "X", "0", "left end of the domain"},
        {"x1", "X", "2", "right end of the domain"},
        {"kappa", "X", "1", "diffusion coefficient > 0"}},
       "kappa",
       make<Heat1DProblem>},
      {"dahlquist",
       "u' = lambda u, u(0) = 1",
       {{"integrator", kIntegrator, "be", "be, fe, tr, mr per level"},
        {"lambda", "X", "-1", "u' = lambda u"}},
       "lambda",
       make<DahlquistProblem>},
      {"linear",
       "u' = a u + b t + c",
       {{"integrator", kIntegrator, "be", "be, sdirk2 per level"},
        {"a", "X", "-1", "u' = a u + b t + c"},
        {"b", "X", "1", "u' = a u + b t + c"},
        {"c", "X", "0", "u' = a u + b t + c"},
        {"u0", "X", "1", "initial value"}},
       nullptr,
       make<Linear>},
      {"heat1d-periodic",
       "u_t = u_xx on a ring",
       {{"integrator", kIntegrator, "be", "be, cn per level"},
        {"nx", "INT", "33", "nodes on the ring"}},
       nullptr,
       make<Heat1DRing>},
      {"heat2d",
       "u_t = Laplace u + f on a rectangle, Dirichlet (space-parallel over PETSc)",
       {{"integrator", kIntegrator, "be", "be, cn per level"},
        {"nx", "INT", "33", "points in x incl. the boundary"},
        {"ny", "INT", "", "points in y incl. the boundary (default: as many as in x)"},
        {"lx", "X", "1", "width of the rectangle"},
        {"ly", "X", "1", "height of the rectangle"},
        {"space_ranks", "INT", "1", "ranks per time step (PETSc; must divide the rank count)"},
        {"ksp", "cg|lu", "cg", "with PETSc: linear solver of each step"}},
       nullptr,
       make<Heat2DProblem>},
      {"advection1d",
       "u_t + a u_x = 0 on a ring, upwind",
       {{"integrator", kIntegrator, "be", "fe, be per level"},
        {"nx", "INT", "64", "nodes on the ring"},
        {"speed", "X", "1", "advection speed a != 0"}},
       nullptr,
       make<Advection>},
      {"brusselator",
       "the Brusselator ODE system, explicit Runge-Kutta",
       {{"integrator", kIntegrator, "rk4", "rk4, rk2 per level"},
        {"A", "X", "1", "parameter A"},
        {"B", "X", "3", "parameter B"}},
       nullptr,
       make<BrusselatorProblem>},
      {"lorenz",
       "the chaotic Lorenz system (XBraid's ex-07 with --integrator fe)",
       {{"integrator", kIntegrator, "be", "be (Newton), fe, rk4 per level"},
        {"sigma", "X", "10", "sigma"},
        {"rho", "X", "28", "rho"},
        {"beta", "X", "2.6666666666666665", "beta (8/3)"}},
       nullptr,
       make<LorenzProblem>},
  };
  return entries;
}

const CatalogueEntry* find_problem(const std::string& name) {
  for (const CatalogueEntry& e : catalogue())
    if (name == e.name) return &e;
  return nullptr;
}

std::unique_ptr<ModelProblem> make_problem(const std::string& name,
                                           const std::map<std::string, std::string>& given) {
  const CatalogueEntry* entry = find_problem(name);
  if (!entry) {
    std::string names;
    for (const CatalogueEntry& e : catalogue())
      names += (names.empty() ? "" : ", ") + std::string(e.name);
    throw InvalidOption("model problem", "name", "'" + name + "' is unknown; accepted: " + names);
  }
  return entry->make(ParameterValues(*entry, given));
}

bool catalogue_has_petsc() {
#ifdef WEFT_HAVE_PETSC
  return true;
#else
  return false;
#endif
}

}  // namespace weft::mgrit::problems
