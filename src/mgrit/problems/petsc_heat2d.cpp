#include "weft/mgrit/problems/petsc_heat2d.hpp"

#include <cmath>
#include <cstring>
#include <utility>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

static_assert(sizeof(PetscScalar) == sizeof(double), "weft needs a real double-precision PETSc");

void petsc_check(PetscErrorCode code, const char* call) {
  if (code == 0) return;
  const char* text = nullptr;
  PetscErrorMessage(code, &text, nullptr);
  throw Error(std::string("PETSc: ") + call + " failed with error " + std::to_string(code) +
              (text ? std::string(": ") + text : std::string()));
}

KspSettings KspSettings::parse(const std::string& name) {
  if (name == "cg") return cg_jacobi();
  if (name == "lu") return redundant_lu();
  throw InvalidOption("PetscHeat2D", "ksp",
                      "'" + name +
                          "' is invalid; accepted: cg (CG + Jacobi, scalable), lu (redundant LU, "
                          "the same arithmetic at every space rank count)");
}

PetscSession::PetscSession() {
  PetscBool initialized = PETSC_FALSE;
  petsc_check(PetscInitialized(&initialized), "PetscInitialized");
  if (!initialized) {
    petsc_check(PetscInitializeNoArguments(), "PetscInitializeNoArguments");
    owner_ = true;
  }
}

PetscSession::~PetscSession() {
  if (owner_) PetscFinalize();
}

namespace {
bool petsc_alive() {
  return PetscInitializeCalled && !PetscFinalizeCalled;
}
}  // namespace

PetscVector::~PetscVector() {
  if (v_ && petsc_alive()) VecDestroy(&v_);
}

PetscVector& PetscVector::operator=(PetscVector&& other) noexcept {
  if (this != &other) {
    if (v_ && petsc_alive()) VecDestroy(&v_);
    v_ = other.v_;
    other.v_ = nullptr;
  }
  return *this;
}

PetscHeat2D::PetscHeat2D(MPI_Comm space, Heat2DGrid grid, LevelList<Method> methods, double t_start,
                         InitialGuess guess, KspSettings ksp)
    : space_(space),
      grid_(grid),
      methods_(std::move(methods)),
      t_start_(t_start),
      guess_(guess),
      settings_(std::move(ksp)) {
  grid_.validate();
  if (!petsc_alive())
    throw Error("PetscHeat2D: PETSc is not initialized (construct a PetscSession first)");
  const auto n = static_cast<PetscInt>(grid_.unknowns());
  const PetscInt mx = grid_.mx(), my = grid_.my();
  petsc_check(MatCreateAIJ(space_.get(), PETSC_DECIDE, PETSC_DECIDE, n, n, 5, nullptr, 4, nullptr,
                           &laplace_),
              "MatCreateAIJ");
  petsc_check(MatGetOwnershipRange(laplace_, &lo_, &hi_), "MatGetOwnershipRange");
  const double cx = 1.0 / (grid_.dx() * grid_.dx()), cy = 1.0 / (grid_.dy() * grid_.dy());
  for (PetscInt k = lo_; k < hi_; ++k) {
    const PetscInt i = k % mx, j = k / mx;
    PetscInt cols[5];
    PetscScalar vals[5];
    PetscInt c = 0;
    if (j > 0) cols[c] = k - mx, vals[c++] = cy;
    if (i > 0) cols[c] = k - 1, vals[c++] = cx;
    cols[c] = k, vals[c++] = -2.0 * (cx + cy);
    if (i + 1 < mx) cols[c] = k + 1, vals[c++] = cx;
    if (j + 1 < my) cols[c] = k + mx, vals[c++] = cy;
    petsc_check(MatSetValues(laplace_, 1, &k, c, cols, vals, INSERT_VALUES), "MatSetValues");
  }
  petsc_check(MatAssemblyBegin(laplace_, MAT_FINAL_ASSEMBLY), "MatAssemblyBegin");
  petsc_check(MatAssemblyEnd(laplace_, MAT_FINAL_ASSEMBLY), "MatAssemblyEnd");
  shape_ = new_vector();
  laplace_shape_ = new_vector();
  work_ = new_vector();
  PetscScalar *s = nullptr, *ls = nullptr;
  petsc_check(VecGetArray(shape_.get(), &s), "VecGetArray");
  petsc_check(VecGetArray(laplace_shape_.get(), &ls), "VecGetArray");
  for (PetscInt k = lo_; k < hi_; ++k) {
    const auto kk = static_cast<std::size_t>(k);
    s[k - lo_] = grid_.shape(grid_.x_of(kk), grid_.y_of(kk));
    ls[k - lo_] = grid_.laplace_shape(grid_.x_of(kk), grid_.y_of(kk));
  }
  petsc_check(VecRestoreArray(laplace_shape_.get(), &ls), "VecRestoreArray");
  petsc_check(VecRestoreArray(shape_.get(), &s), "VecRestoreArray");
}

PetscHeat2D::~PetscHeat2D() {
  if (!petsc_alive()) return;
  for (auto& [h, s] : solves_) {
    KSPDestroy(&s.ksp);
    MatDestroy(&s.matrix);
  }
  MatDestroy(&laplace_);
  shape_ = State();
  laplace_shape_ = State();
  work_ = State();
}

PetscHeat2D::State PetscHeat2D::new_vector() const {
  Vec v = nullptr;
  petsc_check(MatCreateVecs(laplace_, &v, nullptr), "MatCreateVecs");
  petsc_check(VecSet(v, 0.0), "VecSet");
  return State(v);
}

KSP PetscHeat2D::ksp_for(double theta_h) {
  auto it = solves_.find(theta_h);
  if (it != solves_.end()) return it->second.ksp;
  Solve s;
  petsc_check(MatDuplicate(laplace_, MAT_COPY_VALUES, &s.matrix), "MatDuplicate");
  petsc_check(MatScale(s.matrix, -theta_h), "MatScale");
  petsc_check(MatShift(s.matrix, 1.0), "MatShift");
  petsc_check(KSPCreate(space_.get(), &s.ksp), "KSPCreate");
  petsc_check(KSPSetOperators(s.ksp, s.matrix, s.matrix), "KSPSetOperators");
  petsc_check(KSPSetType(s.ksp, settings_.type.c_str()), "KSPSetType");
  PC pc = nullptr;
  petsc_check(KSPGetPC(s.ksp, &pc), "KSPGetPC");
  petsc_check(PCSetType(pc, settings_.pc.c_str()), "PCSetType");
  petsc_check(KSPSetTolerances(s.ksp, settings_.rtol, settings_.atol, PETSC_DEFAULT,
                               static_cast<PetscInt>(settings_.max_iterations)),
              "KSPSetTolerances");
  petsc_check(KSPSetOptionsPrefix(s.ksp, settings_.prefix.c_str()), "KSPSetOptionsPrefix");
  petsc_check(KSPSetFromOptions(s.ksp), "KSPSetFromOptions");
  petsc_check(KSPSetUp(s.ksp), "KSPSetUp");
  return solves_.emplace(theta_h, s).first->second.ksp;
}

PetscHeat2D::State PetscHeat2D::init(double t) {
  State u = new_vector();
  PetscScalar* a = nullptr;
  petsc_check(VecGetArray(u.get(), &a), "VecGetArray");
  for (PetscInt k = lo_; k < hi_; ++k) {
    const auto kk = static_cast<std::size_t>(k);
    a[k - lo_] = t == t_start_ ? grid_.exact(grid_.x_of(kk), grid_.y_of(kk), t) : guess_.at(t, kk);
  }
  petsc_check(VecRestoreArray(u.get(), &a), "VecRestoreArray");
  return u;
}

PetscHeat2D::State PetscHeat2D::exact(double t) {
  State u = new_vector();
  petsc_check(VecAXPBY(u.get(), std::cos(t), 0.0, shape_.get()), "VecAXPBY");
  return u;
}

void PetscHeat2D::step(const State& in, State& out, double t0, double t1, const StepInfo& info) {
  const double h = t1 - t0;
  // f(t) = -sin(t) s - cos(t) Laplace(s); rhs += c (f(t_a) [+ f(t_b)]).
  auto add_forcing = [&](Vec rhs, double c, double sin_sum, double cos_sum) {
    petsc_check(
        VecAXPBYPCZ(rhs, -c * sin_sum, -c * cos_sum, 1.0, shape_.get(), laplace_shape_.get()),
        "VecAXPBYPCZ");
  };
  if (out.empty()) out = new_vector();
  Vec rhs = work_.get();
  const bool cn = methods_.at(info.level) == Method::CrankNicolson;
  const double theta_h = cn ? 0.5 * h : h;
  if (!cn) {
    petsc_check(VecCopy(in.get(), rhs), "VecCopy");  // in + h f(t1)
    add_forcing(rhs, h, std::sin(t1), std::cos(t1));
  } else {
    // (I - h/2 L) out = (I + h/2 L) in + h/2 (f(t0) + f(t1)). With M = I - h/2 L,
    // (I + h/2 L) in = 2 in - M in, so out = M^{-1}(2 in + h/2 (f(t0) + f(t1))) - in: only
    // elementwise operations besides the solve (no MatMult, whose parallel summation order
    // would differ from the serial one).
    petsc_check(VecAXPBY(rhs, 2.0, 0.0, in.get()), "VecAXPBY");
    add_forcing(rhs, 0.5 * h, std::sin(t0) + std::sin(t1), std::cos(t0) + std::cos(t1));
  }
  KSP ksp = ksp_for(theta_h);
  petsc_check(KSPSolve(ksp, rhs, out.get()), "KSPSolve");
  KSPConvergedReason reason;
  petsc_check(KSPGetConvergedReason(ksp, &reason), "KSPGetConvergedReason");
  PetscInt its = 0;
  petsc_check(KSPGetIterationNumber(ksp, &its), "KSPGetIterationNumber");
  ksp_iterations_ += its;
  ++ksp_solves_;
  if (cn) petsc_check(VecAXPY(out.get(), -1.0, in.get()), "VecAXPY");
  if (reason < 0)
    throw Divergence("PetscHeat2D: the KSP solve of the step from t = " + number_text(t0) + " to " +
                     number_text(t1) + " (level " + std::to_string(info.level) +
                     ") did not converge: " + KSPConvergedReasons[reason] + " after " +
                     std::to_string(its) + " iterations (rtol " + number_text(settings_.rtol) +
                     ")");
}

void PetscHeat2D::sum(double a, const State& x, double b, State& y) {
  if (y.empty()) {
    y = new_vector();
    b = 0.0;
  }
  petsc_check(VecAXPBY(y.get(), a, b, x.get()), "VecAXPBY");
}

double PetscHeat2D::norm(const State& u) {
  PetscReal n = 0;
  petsc_check(VecNorm(u.get(), NORM_2, &n), "VecNorm");
  return static_cast<double>(n);
}

void PetscHeat2D::copy(const State& src, State& dst) {
  if (dst.empty()) dst = new_vector();
  petsc_check(VecCopy(src.get(), dst.get()), "VecCopy");
}

void PetscHeat2D::pack(const State& u, void* buffer) const {
  const PetscScalar* a = nullptr;
  petsc_check(VecGetArrayRead(u.get(), &a), "VecGetArrayRead");
  std::memcpy(buffer, a, local_size() * sizeof(PetscScalar));
  petsc_check(VecRestoreArrayRead(u.get(), &a), "VecRestoreArrayRead");
}

void PetscHeat2D::unpack(const void* buffer, State& u) {
  if (u.empty()) u = new_vector();
  PetscScalar* a = nullptr;
  petsc_check(VecGetArray(u.get(), &a), "VecGetArray");
  std::memcpy(a, buffer, local_size() * sizeof(PetscScalar));
  petsc_check(VecRestoreArray(u.get(), &a), "VecRestoreArray");
}

std::vector<double> PetscHeat2D::gather(const State& u) const {
  VecScatter scatter = nullptr;
  Vec all = nullptr;
  petsc_check(VecScatterCreateToAll(u.get(), &scatter, &all), "VecScatterCreateToAll");
  petsc_check(VecScatterBegin(scatter, u.get(), all, INSERT_VALUES, SCATTER_FORWARD),
              "VecScatterBegin");
  petsc_check(VecScatterEnd(scatter, u.get(), all, INSERT_VALUES, SCATTER_FORWARD),
              "VecScatterEnd");
  const PetscScalar* a = nullptr;
  std::vector<double> out(grid_.unknowns());
  petsc_check(VecGetArrayRead(all, &a), "VecGetArrayRead");
  std::memcpy(out.data(), a, out.size() * sizeof(double));
  petsc_check(VecRestoreArrayRead(all, &a), "VecRestoreArrayRead");
  VecScatterDestroy(&scatter);
  VecDestroy(&all);
  return out;
}

}  // namespace weft::mgrit::problems
