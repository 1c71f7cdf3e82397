#pragma once
// Space-time parallel 2-D heat equation over PETSc (optional: library weft_petsc_problems, built
// only when PETSc is found; WEFT_HAVE_PETSC is then defined for its users).
//
// The problem and discretization are problems::Heat2D's (heat2d.hpp): the manufactured solution
// s(x, y) cos t, the 5-point stencil, be or cn per level. Here the state is a
// PETSc Vec distributed over a *space communicator* (one time group of
// split_space_time(), space_time.hpp); each time step is a KSP solve over that communicator
// (default CG + Jacobi, which gives the same iterates at every space rank count up to
// rounding; override with the PETSc options database, prefix "heat2d_", e.g.
// -heat2d_ksp_type gmres). pack/unpack copy the local part of the Vec, so the MGRIT solver runs
// on the *time communicator*; the spatial norm is the Euclidean norm reduced over the space
// communicator.
//
//   weft::mpi::Environment env(&argc, &argv);
//   problems::PetscSession petsc;                                  // PetscInitialize/Finalize
//   auto comms = problems::split_space_time(MPI_COMM_WORLD, 2);    // S = 2
//   problems::PetscHeat2D app(comms.space.get(), problems::Heat2DGrid{33, 33, 1.0, 1.0},
//                             problems::Heat2D::Method::BackwardEuler, 0.0, InitialGuess::zero());
//   Solver<problems::PetscHeat2D> solver(app, comms.time.get(), grid, options);
//
// Destroy every App, Solver and state before the PetscSession ends.
#include <mpi.h>
#include <petscksp.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "weft/mgrit/problems/heat2d.hpp"
#include "weft/mgrit/problems/initial_guess.hpp"
#include "weft/mgrit/problems/level_list.hpp"
#include "weft/mgrit/types.hpp"
#include "weft/util/mpi.hpp"

namespace weft::mgrit::problems {

/// Throws weft::Error naming the PETSc call and PETSc's message unless `code` is 0.
void petsc_check(PetscErrorCode code, const char* call);

/// PETSc for the lifetime of the object (after MPI_Init): initializes it unless it already is,
/// and finalizes it at the end if it initialized it. MPI itself is left alone.
class PetscSession {
 public:
  PetscSession();
  ~PetscSession();
  PetscSession(const PetscSession&) = delete;
  PetscSession& operator=(const PetscSession&) = delete;

 private:
  bool owner_ = false;
};

/// A PETSc Vec held by value: empty when default-constructed, movable, destroyed with the object.
class PetscVector {
 public:
  PetscVector() = default;
  explicit PetscVector(Vec v) : v_(v) {}
  ~PetscVector();
  PetscVector(PetscVector&& other) noexcept : v_(other.v_) { other.v_ = nullptr; }
  PetscVector& operator=(PetscVector&& other) noexcept;
  PetscVector(const PetscVector&) = delete;
  PetscVector& operator=(const PetscVector&) = delete;

  Vec get() const { return v_; }
  bool empty() const { return v_ == nullptr; }

 private:
  Vec v_ = nullptr;
};

/// How each step's linear system is solved. The default, CG + Jacobi, is scalable; its
/// iterates depend on the space rank count only through the rounding of its inner products, so
/// results agree between rank counts to the rounding level (about 1e-15 absolute).
/// redundant_lu() gathers the system on every space rank and solves it by LU: the same
/// arithmetic at every space rank count, so every step is bitwise identical (not scalable; for
/// checks and small grids).
struct KspSettings {
  std::string type = KSPCG;        ///< KSP type
  std::string pc = PCJACOBI;       ///< preconditioner
  double rtol = 1e-13;             ///< relative tolerance of each solve
  double atol = 1e-50;             ///< absolute tolerance
  int max_iterations = 10000;      ///< per solve
  std::string prefix = "heat2d_";  ///< PETSc options prefix (KSPSetFromOptions is called)

  static KspSettings cg_jacobi() { return {}; }
  static KspSettings redundant_lu() {
    KspSettings s;
    s.type = KSPPREONLY;
    s.pc = PCREDUNDANT;
    return s;
  }
  /// "cg" (cg_jacobi) or "lu" (redundant_lu); throws weft::InvalidOption ("PetscHeat2D: ksp ...").
  static KspSettings parse(const std::string& name);
};

class PetscHeat2D {
 public:
  using State = PetscVector;
  using Method = Heat2D::Method;

  /// Collective over `space`. Throws weft::InvalidOption for a bad grid.
  PetscHeat2D(MPI_Comm space, Heat2DGrid grid, LevelList<Method> methods, double t_start,
              InitialGuess guess, KspSettings ksp = {});
  ~PetscHeat2D();
  PetscHeat2D(const PetscHeat2D&) = delete;
  PetscHeat2D& operator=(const PetscHeat2D&) = delete;

  State init(double t);
  void step(const State& in, State& out, double t0, double t1, const StepInfo& info);
  void sum(double a, const State& x, double b, State& y);
  double norm(const State& u);
  void copy(const State& src, State& dst);
  /// The local part (the same on every rank with the same space index).
  std::size_t buffer_size(const State&) const { return local_size() * sizeof(PetscScalar); }
  void pack(const State& u, void* buffer) const;
  void unpack(const void* buffer, State& u);

  /// The whole vector on every rank of the space communicator (collective over it).
  std::vector<double> gather(const State& u) const;
  /// A state holding u* at time t.
  State exact(double t);
  const Heat2DGrid& grid() const { return grid_; }
  MPI_Comm space() const { return space_.get(); }
  std::size_t local_size() const { return static_cast<std::size_t>(hi_ - lo_); }
  /// KSP iterations and solves on this rank so far.
  long long ksp_iterations() const { return ksp_iterations_; }
  long long ksp_solves() const { return ksp_solves_; }
  void check_levels(int levels) const {
    check_list_length("PetscHeat2D", "integrator", methods_.size(), levels);
  }

 private:
  struct Solve {
    Mat matrix = nullptr;  // I - theta_h Laplace
    KSP ksp = nullptr;
  };
  KSP ksp_for(double theta_h);
  State new_vector() const;

  mpi::OwnedComm space_;
  Heat2DGrid grid_;
  LevelList<Method> methods_;
  double t_start_;
  InitialGuess guess_;
  KspSettings settings_;
  Mat laplace_ = nullptr;
  PetscInt lo_ = 0, hi_ = 0;
  State shape_, laplace_shape_, work_;  // s, Laplace(s) at the local unknowns
  std::map<double, Solve> solves_;
  long long ksp_iterations_ = 0, ksp_solves_ = 0;
};

}  // namespace weft::mgrit::problems
