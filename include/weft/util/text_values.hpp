#pragma once
// Values given as text (flags, keyword arguments, config files) with strict conversions whose
// errors are weft::InvalidOption naming the value: option() is its name, detail() reads
// "'TEXT' is invalid (DETAIL); accepted: ACCEPTED". Messages that mention another value spell
// its name as the front end does (spell("levels"): "levels" here, "--levels" in the CLI).
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace weft {

class TextValues {
 public:
  using Spelling = std::function<std::string(const std::string&)>;

  /// `owner` names the values in errors ("heat1d", "run"); `fallbacks` holds every known name
  /// with its default text ("" where none). Throws InvalidOption for a given name not among
  /// them, listing `known` (the names the owner accepts).
  TextValues(std::string owner, const std::map<std::string, std::string>& given,
             const std::vector<std::pair<std::string, std::string>>& fallbacks,
             Spelling spell = {});

  const std::string& text(const std::string& name) const;
  bool given(const std::string& name) const;
  std::string spell(const std::string& name) const { return spell_ ? spell_(name) : name; }

  double number(const std::string& name, const std::string& accepted = "a finite number") const;
  double positive(const std::string& name) const;  ///< finite and > 0
  long long integer(const std::string& name, long long min, const std::string& accepted,
                    long long max = std::numeric_limits<int>::max()) const;
  /// A comma list of integers >= min; an item's error names the item.
  std::vector<int> int_list(const std::string& name, int min, const std::string& accepted) const;
  /// A comma list of numbers > 0.
  std::vector<double> positive_list(const std::string& name, const std::string& accepted) const;
  /// The index of the text among `choices` (accepted: the choices).
  std::size_t choice(const std::string& name, const std::vector<std::string>& choices) const;
  bool switch_value(const std::string& name) const { return choice(name, {"0", "1"}) == 1; }

  /// Throws InvalidOption: "'TEXT' is invalid (DETAIL); accepted: ACCEPTED" for `name`.
  [[noreturn]] void invalid(const std::string& name, const std::string& accepted,
                            const std::string& detail = "") const;
  /// The same for a value not (or not only) the named text, e.g. one item of a list.
  [[noreturn]] void invalid_text(const std::string& name, const std::string& text,
                                 const std::string& accepted, const std::string& detail = "") const;
  const std::string& owner() const { return owner_; }

 private:
  std::vector<std::string> split(const std::string& name, const std::string& accepted) const;

  std::string owner_;
  std::map<std::string, std::string> text_;
  std::map<std::string, bool> given_;
  Spelling spell_;
};

}  // namespace weft
