#include "weft/mgrit/problems/level_list.hpp"

namespace weft::mgrit::problems {

void invalid_value(const std::string& owner, const std::string& option, const std::string& text,
                   const std::string& accepted, const std::string& why) {
  throw InvalidOption(
      owner, option,
      "'" + text + "' is invalid" + (why.empty() ? "" : ": " + why) + "; accepted: " + accepted);
}

std::vector<std::string> split_list(const std::string& owner, const std::string& option,
                                    const std::string& text, const std::string& accepted) {
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) invalid_value(owner, option, text, accepted, "empty entry in the list");
    items.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return items;
}

void check_list_length(const std::string& owner, const std::string& option, std::size_t entries,
                       int levels) {
  if (static_cast<long long>(entries) > static_cast<long long>(levels))
    throw InvalidOption(owner, option,
                        std::to_string(entries) + " values given but the hierarchy has " +
                            std::to_string(levels) + (levels == 1 ? " level" : " levels") +
                            "; accepted: at most one value per level (the last repeats)");
}

}  // namespace weft::mgrit::problems
