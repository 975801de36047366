// Slurm's hostlist expressions (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST, `scontrol show
// hostnames`): "node[01-04,7],gpu2" is node01, node02, node03, node04, node7, gpu2. petrsim_train
// takes the first host of a job step's node list as the rendezvous address (base/launch_env.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim {

// The most hosts ExpandHostlist returns (a larger expression is an error, not an allocation).
inline constexpr size_t kHostlistHostsMax = 65536;

// The hosts of a hostlist expression, in Slurm's order: comma-separated items (a comma inside
// brackets separates ranges, not items); an item is text with any number of bracket groups, each
// a comma-separated list of numbers and ranges "LO-HI" (LO <= HI), expanded in order, the
// rightmost group fastest ("r[1-2]n[1-2]" is r1n1, r1n2, r2n1, r2n2). A range keeps the digits
// of LO as written: "[08-10]" is 08, 09, 10; "[8-10]" is 8, 9, 10. Whitespace is not allowed.
// Throws ScenarioError naming `what` (e.g. "SLURM_JOB_NODELIST"), the expression, the column and
// what was expected: empty input or items, unbalanced or nested brackets, an empty group, a
// range that is not numbers or runs backwards, more than `hosts_max` hosts.
std::vector<std::string> ExpandHostlist(std::string_view expression, std::string_view what,
                                        size_t hosts_max = kHostlistHostsMax);

// The first host of the expression; the whole expression is checked as ExpandHostlist does,
// without expanding it (no host limit).
std::string FirstHostOfHostlist(std::string_view expression, std::string_view what);

}  // namespace petrsim
