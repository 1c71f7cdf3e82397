#pragma once
// Per-level choices of the model problems (integrators "be,cn", grid sizes "33,17,9"): a list
// indexed by StepInfo::level in which the last entry repeats for the levels beyond it.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "weft/util/error.hpp"

namespace weft::mgrit::problems {

template <class T>
class LevelList {
 public:
  LevelList(T value) : items_{std::move(value)} {}  // NOLINT: one value sets every level
  LevelList(std::vector<T> items) : items_(std::move(items)) {  // NOLINT
    if (items_.empty()) throw InvalidOption("LevelList: a per-level list needs at least one value");
  }
  LevelList(std::initializer_list<T> items) : LevelList(std::vector<T>(items)) {}

  /// The entry of `level`; the last entry covers every level beyond the list.
  const T& at(int level) const {
    const std::size_t l = level < 0 ? 0 : static_cast<std::size_t>(level);
    return l < items_.size() ? items_[l] : items_.back();
  }
  std::size_t size() const { return items_.size(); }
  const std::vector<T>& items() const { return items_; }

 private:
  std::vector<T> items_;
};

// Errors name the library's own option: `owner` is the class ("Heat1DSpaceTime"), `option` the
// parameter ("nx"); weft::InvalidOption::option() and detail() let a front end name its flag.

/// Splits "a,b,c" into its items; an empty text or an empty item throws weft::InvalidOption
/// ("<owner>: <option> '<text>' is invalid; accepted: <accepted>").
std::vector<std::string> split_list(const std::string& owner, const std::string& option,
                                    const std::string& text, const std::string& accepted);

/// Throws weft::InvalidOption when a per-level list has more entries than the hierarchy has
/// levels (a shorter list is fine: its last entry repeats).
void check_list_length(const std::string& owner, const std::string& option, std::size_t entries,
                       int levels);

/// The message of every bad value: "<owner>: <option> '<text>' is invalid[: why]; accepted: ...".
[[noreturn]] void invalid_value(const std::string& owner, const std::string& option,
                                const std::string& text, const std::string& accepted,
                                const std::string& why = "");

/// Parses a comma list of names with `parse_one` (which throws for unknown names) into a
/// LevelList; `accepted` names the accepted values in the error message.
template <class T, class Parse>
LevelList<T> parse_level_list(const std::string& owner, const std::string& option,
                              const std::string& text, const std::string& accepted,
                              Parse parse_one) {
  const std::string what = accepted + ", or a comma list of them, one per level (the last repeats)";
  std::vector<T> out;
  for (const std::string& item : split_list(owner, option, text, what)) {
    bool ok = true;
    T value{};
    try {
      value = parse_one(item);
    } catch (const InvalidOption&) {
      ok = false;
    }
    if (!ok) invalid_value(owner, option, text, what, "'" + item + "' is unknown");
    out.push_back(value);
  }
  return LevelList<T>(std::move(out));
}

}  // namespace weft::mgrit::problems
