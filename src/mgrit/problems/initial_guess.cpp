#include "weft/mgrit/problems/initial_guess.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

InitialGuess InitialGuess::parse(const std::string& text) {
  auto fail = [&]() -> InvalidOption {
    return InvalidOption(
        "InitialGuess", "guess",
        "'" + text + "' is invalid; accepted: zero, value:X, random:SEED, initial");
  };
  if (text == "zero") return zero();
  if (text == "initial") return initial();
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw fail();
  const std::string kind = text.substr(0, colon), arg = text.substr(colon + 1);
  if (arg.empty()) throw fail();
  char* end = nullptr;
  errno = 0;
  if (kind == "value") {
    const double v = std::strtod(arg.c_str(), &end);
    if (*end != '\0' || errno != 0 || !std::isfinite(v)) throw fail();
    return constant(v);
  }
  if (kind == "random") {
    if (arg[0] == '-') throw fail();
    const unsigned long long s = std::strtoull(arg.c_str(), &end, 10);
    if (*end != '\0' || errno != 0) throw fail();
    return random(s);
  }
  throw fail();
}

}  // namespace weft::mgrit::problems
