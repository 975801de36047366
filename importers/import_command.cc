// `petrsim import`; see import_command.h.
#include "importers/import_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "importers/imported_dataset.h"
#include "importers/mmdet3d_infos.h"
#include "importers/nuscenes_tables.h"
#include "model/error.h"
#include "model/progress_line.h"

namespace petrsim {
namespace {

// The non-empty items of a comma-separated option value.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  for (std::string& item : SplitCommaList(text)) {
    if (!item.empty()) out.push_back(std::move(item));
  }
  return out;
}

void AddFilterOptions(CLI::App& command, ImportFlags& flags) {
  command.add_option("-o,--output", flags.output, "the scenario to write (.pbtxt; .pb binary; .json)")->required();
  command.add_option("--classes", flags.classes,
                     "class list of your config, comma separated (default: StreamPETR's 10 nuScenes classes)");
  command.add_option("--range", flags.range,
                     "point_cloud_range of your config (x_min,y_min,z_min,x_max,y_max,z_max) or min,max "
                     "(default: -51.2,-51.2,-5,51.2,51.2,3)");
  command.add_flag("--no-valid-flag", flags.no_valid_flag,
                   "your config sets use_valid_flag=False (a box then counts when num_lidar_pts > 0)");
  command.add_flag("--no-filter-empty-gt", flags.no_filter_empty_gt,
                   "your config sets filter_empty_gt=False (frames without GT are not resampled)");
  command.add_option("--seq-split-num", flags.seq_split_num, "seq_split_num of your config (default 2)");
  command.add_flag("--quiet", flags.quiet,
                   "no progress bar on stderr (a long import draws one when stderr is a terminal)");
}

// The progress bar of the files being read (model/progress_line.h), in bytes.
class ImportProgress {
 public:
  explicit ImportProgress(bool quiet) : start_(Clock::now()), line_(stderr, !quiet && StderrIsTerminal()) {}
  bool enabled() const { return line_.enabled(); }
  void Show(uint64_t done, uint64_t total) {
    line_.Draw(done, total, std::chrono::duration<double>(Clock::now() - start_).count(), "bytes", "read");
  }
  void Clear() { line_.Clear(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  ProgressLine line_;
};

ImportFilters ToFilters(const ImportFlags& flags) {
  ImportFilters filters;
  filters.classes = SplitList(flags.classes);
  std::set<std::string> seen;
  for (const auto& name : filters.classes) {
    if (!seen.insert(name).second) throw ScenarioError(fmt::format("--classes: '{}' appears twice", name));
  }
  if (!flags.range.empty()) ParseRangeOption(flags.range, filters);
  filters.use_valid_flag = !flags.no_valid_flag;
  filters.filter_empty_gt = !flags.no_filter_empty_gt;
  if (flags.seq_split_num < 1 || flags.seq_split_num > 1000) {
    throw ScenarioError(fmt::format("--seq-split-num: must be in [1, 1000], got {}", flags.seq_split_num));
  }
  filters.seq_split_num = flags.seq_split_num;
  return filters;
}

}  // namespace

CLI::App* AddImportCommand(CLI::App& app, ImportFlags& flags) {
  CLI::App* import =
      app.add_subcommand("import",
                         "Build a scenario's dataset from your real metadata (mmdet3d nuScenes info pickles or the "
                         "nuScenes JSON tables), with your config's filters; then `petrsim check` it. Exit 0 written, "
                         "2 bad input.");
  import->require_subcommand(1);
  CLI::App* infos =
      import->add_subcommand("mmdet3d-infos",
                             "mmdet3d 1.0 / StreamPETR info pickles ({'infos': [...], 'metadata': ...}); each file "
                             "becomes a "
                             "sub-dataset, concatenated in the given order (ann_file=[train.pkl, val.pkl])");
  infos->add_option("infos", flags.infos, "info files (.pkl)")->required();
  infos->add_option("--name", flags.names, "sub-dataset names, comma separated (default: the file names)");
  AddFilterOptions(*infos, flags);
  CLI::App* nuscenes =
      import->add_subcommand("nuscenes", "the nuScenes tables (DIR/VERSION/*.json); each split becomes a sub-dataset");
  nuscenes->add_option("--dataroot", flags.dataroot, "the nuScenes directory (holding VERSION/)")->required();
  nuscenes->add_option("--version", flags.version, "v1.0-trainval (default), v1.0-mini, v1.0-test, ...");
  nuscenes->add_option("--split", flags.split,
                       "splits, comma separated: train,val (v1.0-trainval), test, mini_train,mini_val");
  nuscenes->add_option("--split-file", flags.split_file,
                       "a JSON object {\"name\": [\"scene-0001\", ...]} instead of the official lists");
  AddFilterOptions(*nuscenes, flags);
  return import;
}

int RunImport(const CLI::App& import, const ImportFlags& flags, std::FILE* out) {
  const ImportFilters filters = ToFilters(flags);
  std::vector<ImportedSubDataset> data;
  std::string description;
  ImportProgress bar(flags.quiet);
  if (import.get_subcommand("mmdet3d-infos")->parsed()) {
    // The bar counts the bytes of every file (one that cannot be read is its reader's to report).
    uint64_t total = 0, before = 0;
    for (const std::string& path : flags.infos) {
      std::error_code error;
      const auto size = std::filesystem::file_size(path, error);
      if (!error) total += size;
    }
    const std::vector<std::string> names = SplitList(flags.names);
    if (!names.empty() && names.size() != flags.infos.size()) {
      throw ScenarioError(
          fmt::format("--name {}: {} name(s) for {} file(s)", flags.names, names.size(), flags.infos.size()));
    }
    description = "petrsim import mmdet3d-infos:";
    for (size_t i = 0; i < flags.infos.size(); ++i) {
      Mmdet3dInfosOptions options;
      options.name = names.empty() ? "" : names[i];
      options.use_valid_flag = filters.use_valid_flag;
      if (bar.enabled()) {
        options.progress = [&](uint64_t done, uint64_t size) {
          bar.Show(before + done, std::max(total, before + size));
        };
      }
      data.push_back(ReadMmdet3dInfos(flags.infos[i], options));
      std::error_code error;
      const auto size = std::filesystem::file_size(flags.infos[i], error);
      before += error ? 0 : size;
      description += " " + flags.infos[i];
      if (!data.back().version.empty()) description += " (" + data.back().version + ")";
    }
  } else {
    NuScenesOptions options;
    options.dataroot = flags.dataroot;
    options.version = flags.version;
    options.splits = SplitList(flags.split);
    options.split_file = flags.split_file;
    if (bar.enabled()) options.progress = [&](uint64_t done, uint64_t total) { bar.Show(done, total); };
    data = ReadNuScenesTables(options);
    description = fmt::format("petrsim import nuscenes: {} {}, split(s)", flags.dataroot, flags.version);
    for (const auto& sub : data) description += " " + sub.name;
  }
  std::set<std::string> seen;
  for (const auto& sub : data) {
    if (!seen.insert(sub.name).second) {
      throw ScenarioError(fmt::format("two sub-datasets are named '{}'; name them with --name", sub.name));
    }
  }
  bar.Clear();  // the summary follows, maybe on the same terminal
  // Summarized before writing, so that a summary that fails leaves no file behind either.
  const ImportSummary summary = Summarize(data, filters);
  WriteScenarioFile(data, filters, description, flags.output);
  const std::string text = FormatSummary(summary, filters, flags.output);
  std::fwrite(text.data(), 1, text.size(), out);
  return 0;
}

}  // namespace petrsim
