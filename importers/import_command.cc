// `petrsim import`; see import_command.h.
#include "importers/import_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/file_io.h"
#include "base/input_files.h"
#include "base/progress_line.h"
#include "base/run_record.h"
#include "base/utf8.h"
#include "formats/mmcv/config.h"
#include "formats/torch_logs/training_log.h"
#include "importers/import_output.h"
#include "importers/imported_dataset.h"
#include "importers/mmdet3d_config_job.h"
#include "importers/mmdet3d_infos.h"
#include "importers/nuscenes_tables.h"
#include "importers/probe_trace_import.h"
#include "scenario/torch_version.h"

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

// A command-line value that becomes a scenario's text (a class or sub-dataset name) must be UTF-8.
void RequireText(const char* flag, const std::string& value) {
  if (const std::optional<size_t> bad = FirstInvalidUtf8(value)) {
    throw ScenarioError(fmt::format("{} '{}': not text: {}; expected UTF-8", flag, EscapedBytes(value),
                                    InvalidUtf8Detail(value, *bad)));
  }
}

void AddNoCacheFlag(CLI::App& command, ImportFlags& flags) {
  command.add_flag("--no-cache", flags.no_cache,
                   "import even when OUT.petrsim-cache says the inputs are unchanged since OUT was written");
}

void AddFilterOptions(CLI::App& command, ImportFlags& flags) {
  command
      .add_option("-o,--output", flags.output,
                  "the scenario to write: NAME.pb binary protobuf (compact and fast to read: use it for a full "
                  "dataset), NAME.json the protobuf JSON mapping, any other name (NAME.pbtxt) the text format")
      ->required();
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
  AddNoCacheFlag(command, flags);
}

// The progress bar of the files being read (base/progress_line.h), in bytes.
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

// An info file to read, and how.
struct InfoFileRead {
  std::string path;
  Mmdet3dInfosOptions options;
};

// The info files read at once, one thread each (at most the cores there are, in file order), the
// bar summing their bytes. An error is the first file's in the given order, as reading them one
// after another would report it.
std::vector<ImportedSubDataset> ReadInfoFiles(std::vector<InfoFileRead> reads, ImportProgress& bar) {
  const size_t n = reads.size();
  std::vector<ImportedSubDataset> data(n);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::atomic<uint64_t>> done(n);
  std::vector<uint64_t> sizes(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::error_code error;
    const auto size = std::filesystem::file_size(reads[i].path, error);
    if (!error) sizes[i] = size;
  }
  std::mutex bar_mutex;
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      if (bar.enabled()) {
        reads[i].options.progress = [&, i](uint64_t read, uint64_t) {
          done[i] = read;
          uint64_t all = 0, total = 0;
          for (size_t k = 0; k < n; ++k) {
            all += done[k];
            total += sizes[k];
          }
          std::lock_guard<std::mutex> lock(bar_mutex);
          bar.Show(all, std::max(total, all));
        };
      }
      try {
        data[i] = ReadMmdet3dInfos(reads[i].path, reads[i].options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return data;
}

// Above this, a text scenario gets a note that the binary form reads much faster.
constexpr uint64_t kLargeTextScenarioBytes = uint64_t{16} << 20;

std::string FormatMegabytes(uint64_t bytes) {
  return bytes < 100'000 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6);
}

// " (binary protobuf, 15.5 MB)": what the summary's first line says after the path.
std::string WrittenNote(const std::string& path, uint64_t bytes) {
  const ScenarioFileFormat format = ScenarioFileFormatOf(path);
  const char* name = format == ScenarioFileFormat::kBinary ? "binary protobuf"
                     : format == ScenarioFileFormat::kJson ? "protobuf JSON"
                                                           : "text format";
  return fmt::format(" ({}, {})", name, FormatMegabytes(bytes));
}

// A text (or JSON) scenario above kLargeTextScenarioBytes is written as asked, with a note on
// stderr: every command that reads it spends most of its time parsing it, and the binary form
// (-o NAME.pb) reads about seven times faster (bench/import_process.sh).
void NoteLargeTextScenario(const std::string& path, uint64_t bytes) {
  if (ScenarioFileFormatOf(path) == ScenarioFileFormat::kBinary || bytes <= kLargeTextScenarioBytes) return;
  std::string stem = path;
  for (const std::string_view suffix : {".pbtxt", ".textproto", ".txt", ".json"}) {
    if (stem.size() > suffix.size() && stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
      stem.resize(stem.size() - suffix.size());
      break;
    }
  }
  fmt::print(stderr,
             "petrsim import: note: {} holds {} of text, which every petrsim command that reads it parses first "
             "(about 1 s per 25 MB); -o {}.pb writes the same scenario in binary protobuf, a third of the size and "
             "read about seven times faster (a nuScenes trainval import: `check` in 0.3 s instead of 2 s). Every "
             "petrsim command reads either.\n",
             path, FormatMegabytes(bytes), stem);
}

ImportFilters ToFilters(const ImportFlags& flags, bool seq_split_num_given, bool classes_given) {
  ImportFilters filters;
  filters.classes = SplitList(flags.classes);
  if (classes_given && (filters.classes.empty() || filters.classes.size() != SplitCommaList(flags.classes).size())) {
    throw ScenarioError(
        fmt::format("--classes '{}': expected your config's class names, comma separated, found an "
                    "empty name (leave --classes out for StreamPETR's 10 nuScenes classes)",
                    EscapedBytes(flags.classes)));
  }
  RequireText("--classes", flags.classes);
  if (!flags.classes.empty()) filters.origins["classes"] = "--classes";
  if (!flags.range.empty()) filters.origins["range"] = "--range";
  if (flags.no_valid_flag) filters.origins["use_valid_flag"] = "--no-valid-flag";
  if (flags.no_filter_empty_gt) filters.origins["filter_empty_gt"] = "--no-filter-empty-gt";
  if (seq_split_num_given) filters.origins["seq_split_num"] = "--seq-split-num";
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

// Replaces the provenance line of `field` (and the notes that start with any of `stale`) by `line`.
void Reprovenance(ConfigJob& job, const std::string& field, const std::string& line,
                  std::initializer_list<std::string_view> stale = {}) {
  std::erase_if(job.provenance, [&](const std::string& p) { return p.rfind(field + " = ", 0) == 0; });
  job.provenance.push_back(line);
  std::erase_if(job.notes, [&](const std::string& n) {
    return std::any_of(stale.begin(), stale.end(), [&](std::string_view s) { return n.rfind(s, 0) == 0; });
  });
}

uint64_t LineAt(const std::string& text, size_t at) {
  return 1 + static_cast<uint64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

// What the job's training log says beyond the config: the seed the train script drew (`Set random seed to S`), the
// release (`PyTorch: X` of the environment block) and the ranks (`gpu_ids = range(0, N)`); where the log and the
// config disagree, the log (what ran) is used and both are named.
void ApplyLogFacts(ConfigJob& job, const std::string& text, const std::string& path, bool gpus_given) {
  // A seed petrsim's scenario can hold (the log's first seed line; a negative one is ignored).
  if (const auto logged = FindLoggedSeed(text); logged && !logged->negative && logged->seed < (int64_t{1} << 31)) {
    const auto seed = static_cast<uint32_t>(logged->seed);
    if (job.scenario.job().has_seed() && job.scenario.job().seed() != seed) {
      job.notes.push_back(fmt::format("seed: the config says {}, the log {} ({}:{}): the log's is used",
                                      job.scenario.job().seed(), seed, path, logged->line));
    }
    job.scenario.mutable_job()->set_seed(seed);
    Reprovenance(job, "job.seed", fmt::format("job.seed = {}  # {}:{} (Set random seed to)", seed, path, logged->line),
                 {"the config sets no seed", "seed = "});
  }
  if (const auto logged = FindLoggedTorchVersion(text)) {
    job.log_torch_version = logged->text;
    job.log_torch_version_from = fmt::format("{}:{}", path, logged->line);
  }
  if (const size_t at = text.find("gpu_ids = range(0, "); at != std::string::npos && !gpus_given) {
    uint64_t n = 0;
    const char* begin = text.data() + at + 19;
    const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), n);
    // Only a plain count closes the range; 10**12 is not 10, nor 2^32 + 2 two.
    if (ec != std::errc() || end == begin || end == text.data() + text.size() || *end != ')' || n < 1 || n > 65536) {
      const size_t line_end = std::min(text.find('\n', at), at + 60);
      throw ScenarioError(
          fmt::format("{}:{}: {}: expected gpu_ids = range(0, N) with N the job's GPU count in [1, "
                      "65536]; pass --gpus N to use another",
                      path, LineAt(text, at), EscapedBytes(text.substr(at, line_end - at))));
    }
    if (n != job.scenario.job().world_size()) {
      job.notes.push_back(
          fmt::format("world size: the config says {}, the log {} (gpu_ids = range(0, {}) at {}:{}): "
                      "the log's is used",
                      job.scenario.job().world_size(), n, n, path, LineAt(text, at)));
      job.scenario.mutable_job()->set_world_size(n);
      Reprovenance(job, "job.world_size",
                   fmt::format("job.world_size = {}  # {}:{} (gpu_ids = range(0, {}))", n, path, LineAt(text, at), n));
    }
  }
}

// comm.torch_version: --torch-version, else the log's environment block, else 1.9 assumed (said in the summary).
void ApplyRelease(ConfigJob& job, const std::string& given) {
  std::string chosen, from;
  if (!given.empty()) {
    chosen = given;
    from = "--torch-version";
    if (!job.log_torch_version.empty() && ParseTorchVersion(job.log_torch_version) != ParseTorchVersion(given)) {
      job.notes.push_back(fmt::format("release: --torch-version {}, the log PyTorch {} ({}): --torch-version is used",
                                      given, job.log_torch_version, job.log_torch_version_from));
    }
  } else if (!job.log_torch_version.empty()) {
    chosen = job.log_torch_version;
    from = fmt::format("{} (PyTorch: {})", job.log_torch_version_from, job.log_torch_version);
  }
  if (chosen.empty()) {
    job.notes.push_back(
        "comm.torch_version: PyTorch 1.9 assumed (the reference job's); pass --torch-version (or the "
        "job's training log, whose environment block names it)");
    return;
  }
  const auto version = ParseTorchVersion(chosen);
  if (!version) {
    throw ScenarioError(
        fmt::format("{}: PyTorch {} is not a release petrsim models ({})", from, chosen, SupportedTorchVersions()));
  }
  job.scenario.mutable_comm()->set_torch_version(version->ToString());
  Reprovenance(job, "comm.torch_version", fmt::format("comm.torch_version = {}  # {}", version->ToString(), from));
}

// `import mmdet3d-config`: the job from the config, the dataset from the info files it names.
int RunConfigImport(const ImportFlags& flags, std::FILE* out) {
  const bool log = [&] {
    for (const char* ext : {".log", ".txt", ".out", ".err"}) {
      const size_t n = std::strlen(ext);
      if (flags.config.size() > n && flags.config.compare(flags.config.size() - n, n, ext) == 0) return true;
    }
    return false;
  }();
  // A log is read once: its Config: block, then its seed line.
  const std::string log_text = log ? ReadRegularFile(flags.config, "training log", kMaxConfigLogBytes) : "";
  const Config config = log ? ReadConfigBlockOfLogText(log_text, flags.config) : ReadMmcvConfig(flags.config);
  ConfigJobOptions options;
  options.data_root = flags.config_data_root;
  options.infos = flags.config_infos;
  if (flags.gpus > 0) options.gpus = flags.gpus;
  ConfigJob job = ReadConfigJob(config, options);
  if (!flags.log.empty()) {
    if (log) throw ScenarioError(fmt::format("--log {}: the config given is a training log already", flags.log));
    ApplyLogFacts(job, ReadRegularFile(flags.log, "training log", kMaxConfigLogBytes), flags.log, flags.gpus > 0);
  } else if (log) {
    ApplyLogFacts(job, log_text, flags.config, flags.gpus > 0);
  }
  ApplyRelease(job, flags.torch_version);
  std::string description = "petrsim import mmdet3d-config: " + TextOfBytes(flags.config) + "; infos:";
  ImportProgress bar(flags.quiet);
  std::vector<InfoFileRead> reads(job.info_files.size());
  for (size_t i = 0; i < job.info_files.size(); ++i) {
    std::error_code error;
    if (!std::filesystem::exists(job.info_files[i], error)) {
      throw ScenarioError(fmt::format(
          "{}: no such info file (from {}): pass --data-root DIR, the directory the config's data_root stands for on "
          "this machine, or --infos FILE ... with the {} info file(s) in ann_file order",
          job.info_files[i], job.info_file_origins[i], job.info_files.size()));
    }
    reads[i].path = job.info_files[i];
    reads[i].options.name = job.subdataset_names[i];
    reads[i].options.use_valid_flag = job.filters.use_valid_flag;
    reads[i].options.interval_test = job.interval_test;
    description += " " + TextOfBytes(job.info_files[i]);
  }
  std::vector<ImportedSubDataset> data = ReadInfoFiles(std::move(reads), bar);
  std::set<std::string> seen;
  for (auto& sub : data) {
    std::string name = sub.name;
    for (int k = 2; !seen.insert(name).second; ++k) name = fmt::format("{}_{}", sub.name, k);
    sub.name = name;
  }
  bar.Clear();
  for (const std::string& file : job.info_files) job.scenario.mutable_user_source()->add_info_files(TextOfBytes(file));
  ScenarioOverlay overlay;
  overlay.fields = job.scenario;
  overlay.comments = job.provenance;
  for (const std::string& note : job.notes) overlay.comments.push_back("note: " + note);
  const ImportSummary summary = Summarize(data, job.filters);
  CheckImportOutputAgainstInputsRead(flags.output);
  WriteScenarioFile(data, job.filters, description, flags.output, &overlay);
  std::string text = FormatSummary(summary, job.filters, flags.output);
  text += fmt::format("from {} ({} file(s) read):\n", flags.config, config.files.size());
  for (const std::string& line : job.provenance) text += "  " + line + "\n";
  for (const std::string& note : job.notes) text += "  note: " + note + "\n";
  std::fwrite(text.data(), 1, text.size(), out);
  return 0;
}

}  // namespace

CLI::App* AddImportCommand(CLI::App& app, ImportFlags& flags) {
  CLI::App* import =
      app.add_subcommand("import",
                         "Build a scenario's dataset from your real metadata (mmdet3d nuScenes info pickles or the "
                         "nuScenes JSON tables), with your config's filters, or its DDP model from a petrsim_probe "
                         "trace; then `petrsim check` it. Exit 0 written, 2 bad input.");
  import->require_subcommand(1);
  CLI::App* infos =
      import->add_subcommand("mmdet3d-infos",
                             "mmdet3d 1.0 / StreamPETR info pickles ({'infos': [...], 'metadata': ...}); each file "
                             "becomes a "
                             "sub-dataset, concatenated in the given order (ann_file=[train.pkl, val.pkl])");
  infos->add_option("infos", flags.infos, "info files (.pkl)")->required();
  infos->add_option("--name", flags.names, "sub-dataset names, comma separated (default: the file names)");
  AddFilterOptions(*infos, flags);
  CLI::App* config = import->add_subcommand(
      "mmdet3d-config",
      "your mmdet3d / StreamPETR training config (.py with its _base_ chain, a cfg.dump() .json, or a training log "
      "holding mmcv's `Config:` block), read WITHOUT running it: the job (GPUs, batch, workers, sampler, length, "
      "head, DDP flags, seed), the train dataset's info files and filters; each value's file:line is recorded");
  config->add_option("config", flags.config, "the config file")->required();
  config->add_option("--data-root", flags.config_data_root,
                     "where the info files are: replaces the config's data_root in ann_file (default: ann_file as "
                     "written, relative to here)");
  config->add_option("--infos", flags.config_infos, "the info files, in ann_file's order (instead of ann_file)");
  config->add_option("--gpus", flags.gpus, "the job's GPU count (default: the config's num_gpus or gpu_ids)")
      ->check(CLI::Range(1, 65536));
  config->add_option("-o,--output", flags.output, "the scenario to write (.pbtxt; .pb binary; .json)")->required();
  config->add_option("--log", flags.log,
                     "the job's training log: the seed it drew, its PyTorch release (environment block) and its "
                     "ranks (gpu_ids), used where they differ from the config, both named");
  config->add_option("--torch-version", flags.torch_version,
                     "the job's PyTorch release, e.g. 1.13.1+cu117 (default: the log's environment block; else 1.9 "
                     "assumed, said in the summary)");
  config->add_flag("--quiet", flags.quiet, "no progress bar on stderr");
  AddNoCacheFlag(*config, flags);
  CLI::App* nuscenes =
      import->add_subcommand("nuscenes", "the nuScenes tables (DIR/VERSION/*.json); each split becomes a sub-dataset");
  nuscenes->add_option("--dataroot", flags.dataroot, "the nuScenes directory (holding VERSION/)")->required();
  nuscenes->add_option("--version", flags.version, "v1.0-trainval (default), v1.0-mini, v1.0-test, ...");
  nuscenes->add_option("--split", flags.split,
                       "splits, comma separated: train,val (v1.0-trainval), test, mini_train,mini_val");
  nuscenes->add_option("--split-file", flags.split_file,
                       "a JSON object {\"name\": [\"scene-0001\", ...]} instead of the official lists");
  AddFilterOptions(*nuscenes, flags);
  AddProbeTraceImport(*import, flags.probe_trace);
  return import;
}

namespace {

// The summary an import prints, kept to be recorded as well.
class CapturedOutput {
 public:
  CapturedOutput() : file_(::open_memstream(&buffer_, &size_)) {
    if (file_ == nullptr)
      throw ScenarioError(fmt::format("cannot capture the import's summary: {}", std::strerror(errno)));
  }
  ~CapturedOutput() {
    if (file_ != nullptr) std::fclose(file_);
    std::free(buffer_);
  }
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;
  std::FILE* file() { return file_; }
  // What was written, once; the stream is closed.
  std::string Take() {
    std::fclose(file_);
    file_ = nullptr;
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

int RunImportOnce(const CLI::App& import, const ImportFlags& flags, std::FILE* out);

}  // namespace

int RunImport(const CLI::App& import, const ImportFlags& flags, std::FILE* out) {
  if (import.get_subcommand("probe-trace")->parsed()) return RunProbeTraceImport(flags.probe_trace, out);
  std::vector<std::string> inputs = flags.infos;
  inputs.insert(inputs.end(), flags.config_infos.begin(), flags.config_infos.end());
  for (const std::string* path : {&flags.config, &flags.log, &flags.split_file}) {
    if (!path->empty()) inputs.push_back(*path);
  }
  CheckImportOutput(flags.output, inputs);
  // Keyed by the command line: a caller that gives none (a test driving RunImport) gets no cache.
  const bool cache = !flags.no_cache && !flags.command_line.empty();
  if (cache) {
    if (const std::optional<RecordedRun> run =
            FindRecordedRun(ImportRecordPath(flags.output), flags.command_line, flags.output)) {
      std::fwrite(run->printed.data(), 1, run->printed.size(), out);
      if (!flags.quiet) {
        fmt::print(stderr,
                   "petrsim import: every input is unchanged since {} was written: kept it ({}; --no-cache "
                   "imports again)\n",
                   flags.output, ImportRecordPath(flags.output));
      }
      return run->exit_code;
    }
  }
  // The files read from here on are what the new record depends on.
  ClearInputFilesRead();
  CapturedOutput captured;
  int code = 0;
  try {
    code = RunImportOnce(import, flags, captured.file());
  } catch (...) {
    const std::string partial = captured.Take();
    std::fwrite(partial.data(), 1, partial.size(), out);
    throw;
  }
  const std::string summary = captured.Take();
  std::fwrite(summary.data(), 1, summary.size(), out);
  if (code == 0 && cache) {
    StoreRecordedRun(ImportRecordPath(flags.output), flags.command_line, InputFilesRead(), InputDirectoriesListed(),
                     flags.output, RecordedRun{summary, code});
  }
  return code;
}

namespace {

int RunImportOnce(const CLI::App& import, const ImportFlags& flags, std::FILE* out) {
  if (import.get_subcommand("mmdet3d-config")->parsed()) return RunConfigImport(flags, out);
  const CLI::App* source = import.get_subcommand("mmdet3d-infos")->parsed() ? import.get_subcommand("mmdet3d-infos")
                                                                            : import.get_subcommand("nuscenes");
  const ImportFilters filters = ToFilters(flags, source->get_option("--seq-split-num")->count() > 0,
                                          source->get_option("--classes")->count() > 0);
  std::vector<ImportedSubDataset> data;
  std::string description;
  ImportProgress bar(flags.quiet);
  if (import.get_subcommand("mmdet3d-infos")->parsed()) {
    RequireText("--name", flags.names);
    const std::vector<std::string> names = SplitList(flags.names);
    if (!names.empty() && names.size() != flags.infos.size()) {
      throw ScenarioError(
          fmt::format("--name {}: {} name(s) for {} file(s)", flags.names, names.size(), flags.infos.size()));
    }
    std::vector<InfoFileRead> reads(flags.infos.size());
    for (size_t i = 0; i < reads.size(); ++i) {
      reads[i].path = flags.infos[i];
      reads[i].options.name = names.empty() ? "" : names[i];
      reads[i].options.use_valid_flag = filters.use_valid_flag;
    }
    data = ReadInfoFiles(std::move(reads), bar);
    description = "petrsim import mmdet3d-infos:";
    for (size_t i = 0; i < flags.infos.size(); ++i) {
      description += " " + TextOfBytes(flags.infos[i]);
      if (!data[i].version.empty()) description += " (" + data[i].version + ")";
    }
  } else {
    NuScenesOptions options;
    options.dataroot = flags.dataroot;
    options.version = flags.version;
    options.splits = SplitList(flags.split);
    options.split_file = flags.split_file;
    if (bar.enabled()) options.progress = [&](uint64_t done, uint64_t total) { bar.Show(done, total); };
    data = ReadNuScenesTables(options);
    description = fmt::format("petrsim import nuscenes: {} {}, split(s)", TextOfBytes(flags.dataroot),
                              TextOfBytes(flags.version));
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
  CheckImportOutputAgainstInputsRead(flags.output);
  const uint64_t bytes = WriteScenarioFile(data, filters, description, flags.output);
  const std::string text = FormatSummary(summary, filters, flags.output, WrittenNote(flags.output, bytes));
  std::fwrite(text.data(), 1, text.size(), out);
  NoteLargeTextScenario(flags.output, bytes);
  return 0;
}

}  // namespace

}  // namespace petrsim
