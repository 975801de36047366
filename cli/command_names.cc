// Command names on the command line; see command_names.h.
#include "cli/command_names.h"

#include <algorithm>

namespace petrsim {

int EditDistance(std::string_view a, std::string_view b, int cap) {
  const int n = static_cast<int>(a.size());
  const int m = static_cast<int>(b.size());
  if (std::abs(n - m) > cap) return cap + 1;
  // Three rows of the dynamic programme (the transposition looks two rows back).
  std::vector<int> before(m + 1), previous(m + 1), current(m + 1);
  for (int j = 0; j <= m; ++j) previous[j] = j;
  for (int i = 1; i <= n; ++i) {
    current[0] = i;
    int row_min = current[0];
    for (int j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
      row_min = std::min(row_min, current[j]);
    }
    if (row_min > cap) return cap + 1;
    before.swap(previous);
    previous.swap(current);
  }
  return std::min(previous[m], cap + 1);
}

std::optional<std::string> NearestCommand(std::string_view word, std::span<const std::string> names) {
  constexpr int kMaxEdits = 2;
  std::optional<std::string> best;
  int best_distance = kMaxEdits + 1;
  for (const std::string& name : names) {
    if (name == word) return std::nullopt;
    const int distance = EditDistance(word, name, kMaxEdits);
    if (distance < best_distance && 2 * distance < static_cast<int>(std::max(word.size(), name.size()))) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

const CLI::App* FindCommand(const CLI::App& app, std::span<const std::string> path) {
  const CLI::App* at = &app;
  for (const std::string& word : path) {
    const CLI::App* next = nullptr;
    for (const CLI::App* command : at->get_subcommands({})) {
      if (command->get_name() == word) next = command;
    }
    if (next == nullptr) return nullptr;
    at = next;
  }
  return at;
}

}  // namespace petrsim
