#pragma once
// The initial guess a model problem returns at t > t_start: zero, a constant, random values
// drawn from a seed and the time point (so they do not depend on the rank count), or the
// problem's initial value at every point (the problems that take it; the others refuse it).
#include <cstdint>
#include <cstring>
#include <string>

namespace weft::mgrit::problems {

struct InitialGuess {
  enum class Kind { Zero, Value, Random, Initial };
  Kind kind = Kind::Zero;
  double value = 0.0;
  std::uint64_t seed = 0;

  static InitialGuess zero() { return {}; }
  static InitialGuess constant(double v) { return {Kind::Value, v, 0}; }
  static InitialGuess random(std::uint64_t seed) { return {Kind::Random, 0.0, seed}; }
  static InitialGuess initial() { return {Kind::Initial, 0.0, 0}; }
  /// Parses "zero", "value:X", "random:SEED" or "initial"; throws weft::InvalidOption otherwise.
  static InitialGuess parse(const std::string& text);

  /// The guess for component `component` at time t.
  double at(double t, std::uint64_t component) const {
    switch (kind) {
      case Kind::Zero:
      case Kind::Initial:  // the problems that take it return their initial value instead
        return 0.0;
      case Kind::Value:
        return value;
      case Kind::Random: {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &t, sizeof(bits));
        std::uint64_t z = seed ^ (bits * 0x9E3779B97F4A7C15ull) ^ (component << 32);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64 finalizer
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return static_cast<double>(z >> 11) * 0x1.0p-53;  // uniform in [0, 1)
      }
    }
    return 0.0;
  }
};

}  // namespace weft::mgrit::problems
