#include "weft/util/text_values.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

#include "weft/util/error.hpp"

namespace weft {

TextValues::TextValues(std::string owner, const std::map<std::string, std::string>& given,
                       const std::vector<std::pair<std::string, std::string>>& fallbacks,
                       Spelling spell)
    : owner_(std::move(owner)), spell_(std::move(spell)) {
  for (const auto& [name, fallback] : fallbacks) {
    const auto it = given.find(name);
    text_[name] = it == given.end() ? fallback : it->second;
    given_[name] = it != given.end();
  }
  for (const auto& [name, text] : given)
    if (!text_.count(name)) {
      std::string names;
      for (const auto& [known, fallback] : fallbacks)
        names += (names.empty() ? "" : ", ") + this->spell(known);
      throw InvalidOption(
          owner_, name,
          "= '" + text + "' is not a parameter of " + owner_ + "; accepted: " + names);
    }
}

const std::string& TextValues::text(const std::string& name) const {
  const auto it = text_.find(name);
  if (it == text_.end())  // the owner reads a value it does not list
    throw std::logic_error(owner_ + ": reads " + name + ", not among its values");
  return it->second;
}

bool TextValues::given(const std::string& name) const {
  const auto it = given_.find(name);
  return it != given_.end() && it->second;
}

void TextValues::invalid_text(const std::string& name, const std::string& text,
                              const std::string& accepted, const std::string& detail) const {
  throw InvalidOption(owner_, name,
                      "'" + text + "' is invalid" +
                          (detail.empty() ? std::string() : " (" + detail + ")") +
                          "; accepted: " + accepted);
}

void TextValues::invalid(const std::string& name, const std::string& accepted,
                         const std::string& detail) const {
  invalid_text(name, text(name), accepted, detail);
}

namespace {
bool to_number(const std::string& t, double& value) {
  char* end = nullptr;
  errno = 0;
  value = std::strtod(t.c_str(), &end);
  return !t.empty() && end != t.c_str() && *end == '\0' && errno != ERANGE && std::isfinite(value);
}
bool to_integer(const std::string& t, long long& value) {
  char* end = nullptr;
  errno = 0;
  value = std::strtoll(t.c_str(), &end, 10);
  return !t.empty() && end != t.c_str() && *end == '\0' && errno != ERANGE;
}
}  // namespace

double TextValues::number(const std::string& name, const std::string& accepted) const {
  double value = 0;
  if (!to_number(text(name), value)) invalid(name, accepted);
  return value;
}

double TextValues::positive(const std::string& name) const {
  const double v = number(name, "a finite number > 0");
  if (!(v > 0)) invalid(name, "a finite number > 0");
  return v;
}

long long TextValues::integer(const std::string& name, long long min, const std::string& accepted,
                              long long max) const {
  long long value = 0;
  if (!to_integer(text(name), value) || value < min || value > max) invalid(name, accepted);
  return value;
}

std::vector<std::string> TextValues::split(const std::string& name,
                                           const std::string& accepted) const {
  const std::string& t = text(name);
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = t.find(',', start);
    const std::string item =
        t.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) invalid(name, accepted, "empty list item");
    items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<int> TextValues::int_list(const std::string& name, int min,
                                      const std::string& accepted) const {
  std::vector<int> values;
  for (const std::string& item : split(name, accepted)) {
    long long v = 0;
    if (!to_integer(item, v) || v < min || v > std::numeric_limits<int>::max()) {
      if (item == text(name)) invalid(name, accepted);
      invalid(name, accepted, "item '" + item + "'");
    }
    values.push_back(static_cast<int>(v));
  }
  return values;
}

std::vector<double> TextValues::positive_list(const std::string& name,
                                              const std::string& accepted) const {
  std::vector<double> values;
  for (const std::string& item : split(name, accepted)) {
    double w = 0;
    if (!to_number(item, w) || !(w > 0)) invalid(name, accepted, "item '" + item + "'");
    values.push_back(w);
  }
  return values;
}

std::size_t TextValues::choice(const std::string& name,
                               const std::vector<std::string>& choices) const {
  std::string accepted;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (text(name) == choices[i]) return i;
    accepted += (i ? ", " : "") + choices[i];
  }
  invalid(name, accepted);
}

}  // namespace weft
