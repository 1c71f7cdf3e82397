#pragma once
// weft's exception hierarchy. Every error carries a message with context (what, which rank,
// which value); the CLI maps the kind to an exit code.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace weft {

/// Base of all weft errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An option or argument outside what is accepted (exit code 2 in the CLI).
///
/// Library code names its own options, not a front end's flags: the three-argument form reads
/// "OWNER: OPTION DETAIL", e.g. ("Heat1DSpaceTime", "nx", "'17,10' is invalid; accepted: ...").
/// A front end that maps OPTION to a flag of its own rewrites the message from option() and
/// detail() (the CLI: "option --nx: '17,10' is invalid; accepted: ...").
class InvalidOption : public Error {
 public:
  using Error::Error;
  InvalidOption(const std::string& owner, const std::string& option, const std::string& detail)
      : Error(owner + ": " + option + " " + detail),
        owner_(owner),
        option_(option),
        detail_(detail) {}
  /// Empty for messages built from a single string.
  const std::string& owner() const noexcept { return owner_; }
  const std::string& option() const noexcept { return option_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string owner_, option_, detail_;
};

/// Missing, corrupt or inconsistent input data.
class BadData : public Error {
 public:
  using Error::Error;
};

/// An MPI call failed, or the ranks disagree about something they must agree on.
class MpiError : public Error {
 public:
  using Error::Error;
};

/// An iteration produced NaN/Inf or grew beyond the divergence limit.
class Divergence : public Error {
 public:
  using Error::Error;
};

/// Marks an error that every rank of a communicator raised together, with the same kind and
/// message (weft::mpi::agree_or_throw): the job can end with one line on one rank and the same
/// exit code everywhere, without MPI_Abort. Catch the kind as usual; test for this marker with
/// `dynamic_cast<const weft::Collective*>(&e)`.
class Collective {
 public:
  virtual ~Collective() = default;
};

/// `Kind` (InvalidOption, BadData, ...) raised collectively.
template <class Kind>
class CollectiveError : public Kind, public Collective {
 public:
  using Kind::Kind;
};

/// A number as people read it in a message: shortest %g form ("1e-09", "0.456", "inf").
inline std::string number_text(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", value);
  return buf;
}

}  // namespace weft

/// Always-on check: throws `Kind` with file, line and the message when `cond` fails.
#define WEFT_CHECK(cond, Kind, msg)                                                          \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw Kind(std::string(msg) + " [" + __FILE__ + ":" + std::to_string(__LINE__) + "]"); \
  } while (0)
