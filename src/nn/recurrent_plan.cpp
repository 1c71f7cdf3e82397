#include "recurrent_plan.hpp"

#include <algorithm>
#include <set>

namespace weft::nn::detail {

CoarseInputPlan::CoarseInputPlan(const std::vector<mgrit::StepSite>& sites,
                                 const std::vector<std::int64_t>& step_begin, int rank,
                                 CoarseInput kind)
    : kind_(kind), step_begin_(step_begin) {
  const int ranks = static_cast<int>(step_begin.size()) - 1;
  std::vector<std::set<StepInterval>> need(static_cast<size_t>(ranks));
  for (const mgrit::StepSite& s : sites) {
    const StepInterval i{std::min(s.from, s.to), std::max(s.from, s.to)};
    if (i.second - i.first >= 2) need[static_cast<size_t>(s.rank)].insert(i);
  }
  mine_.assign(need[static_cast<size_t>(rank)].begin(), need[static_cast<size_t>(rank)].end());
  for (int q = 0; q < ranks; ++q) {
    if (q == rank) continue;
    Peer send{q, {}}, recv{q, {}};
    for (const StepInterval& i : need[static_cast<size_t>(q)])
      if (contributes(rank, i)) send.intervals.push_back(i);
    for (const StepInterval& i : mine_)
      if (contributes(q, i)) recv.intervals.push_back(i);
    if (!send.intervals.empty()) sends_.push_back(std::move(send));
    if (!recv.intervals.empty()) recvs_.push_back(std::move(recv));
  }
}

int CoarseInputPlan::owner(std::int64_t step) const {
  return static_cast<int>(std::upper_bound(step_begin_.begin(), step_begin_.end(), step) -
                          step_begin_.begin()) -
         1;
}

StepInterval CoarseInputPlan::part(int q, const StepInterval& i) const {
  const auto qi = static_cast<size_t>(q);
  if (kind_ == CoarseInput::Start)
    return owner(i.first) == q ? StepInterval{i.first, i.first + 1} : StepInterval{0, 0};
  const std::int64_t begin = std::max(i.first, step_begin_[qi]);
  const std::int64_t end = std::min(i.second, step_begin_[qi + 1]);
  return begin < end ? StepInterval{begin, end} : StepInterval{0, 0};
}

bool CoarseInputPlan::contributes(int q, const StepInterval& i) const {
  const StepInterval p = part(q, i);
  return p.first < p.second;
}

}  // namespace weft::nn::detail
